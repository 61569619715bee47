"""Advice worth no points: a mask made on the CPU whatever the input's device."""

from exercise.causal_self_attention.diagnosis import device_advice
from exercise.causal_self_attention.groups import graded


@graded
def test_runs_on_any_device(student, diagnosis, findings):
    with student.side_allowance(timeouts=1):
        finding = device_advice(student)
    if finding is not None:
        diagnosis.findings.append(finding)
        findings.add(finding.to_report())
