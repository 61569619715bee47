"""Advice worth no points: a mask made on the CPU whatever the input's device."""
import pytest

from exercise.causal_self_attention.diagnosis import device_advice


@pytest.mark.points(0)
def test_runs_on_any_device(student, diagnosis, findings):
    """Advice: the layer creates its tensors on the input's device"""
    with student.side_allowance(timeouts=1):
        finding = device_advice(student)
    if finding is not None:
        diagnosis.findings.append(finding)
        findings.add(finding.to_report())
