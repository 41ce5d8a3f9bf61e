#!/usr/bin/env python3
"""autograder.py: Classroom 50's autograder for this project's handout.

Classroom 50's runner starts it in the student's checkout, with the
submission's identity in its environment (CLASSROOM, ASSIGNMENT,
SUBMISSION_TAG, COMMIT_URL, RELEASE_URL, REVIEW_URL).  It installs what
is missing (make deps), grades (make grade, which writes
build/grade/result.json in the schema classroom50/result/v1 with those
fields) and puts that result.json where the runner reads it, in the
checkout's top folder.  A failing grade is a grade, not a failure of the
runner: it exits 0 whenever result.json was written.

`make gradescope` in the teacher's tree writes this file beside the
Gradescope zip; put it in the classroom's repository as
CLASSROOM/autograders/ASSIGNMENT/autograder.py.
"""
import os
import shutil
import subprocess
import sys

subprocess.run(["make", "--no-print-directory", "deps"], check=False)
subprocess.run(["make", "--no-print-directory", "grade"], check=False)
result = os.path.join("build", "grade", "result.json")
if not os.path.isfile(result):
    print("::error::make grade wrote no %s" % result, file=sys.stderr)
    sys.exit(1)
shutil.copyfile(result, "result.json")  # make grade printed the summary
sys.exit(0)
