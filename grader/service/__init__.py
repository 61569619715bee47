"""`grade serve`: the grader over HTTP for platforms (API v1, Bearer tokens, signed callbacks) and a
page where a student drops a file and reads the feedback. app.py is the service, engines.py what
grades (an embedded warm pool, or the queue's workers), store.py the grades and results, tokens.py
who may call, throttle.py the rate and size limits, callbacks.py the signed deliveries,
student_page.py the student page."""
