"""nbgrader configuration: the repository root is the course directory.

Sources (with solutions and hidden tests) live in ``solutions/``; ``nbgrader generate_assignment`` writes the
student release to ``exercises/``, which is committed. Everything an instructor's grading creates (``submitted/``,
``autograded/``, ``feedback/``, ``gradebook.db``, the exchange in ``.exchange/``) stays inside the repository and
is git-ignored, so nothing depends on ``~/.jupyter`` or system paths.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "autograd-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.Exchange.root = os.path.join(ROOT, ".exchange")

# The release: nbgrader's own steps, then one that lets Run All reach every test cell of an untouched exercise
# (autograder/release.py: learner cells are tagged raises-exception, so a "not written yet" error does not stop it).
c.GenerateAssignment.preprocessors = [
    "nbgrader.preprocessors.IncludeHeaderFooter", "nbgrader.preprocessors.InstantiateTests",
    "nbgrader.preprocessors.LockCells", "nbgrader.preprocessors.ClearSolutions", "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.CheckCellMetadata", "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.SaveCells", "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearMarkScheme", "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.CheckCellMetadata", "autograder.release.RunAllThrough",
]

# A learner's cell gets 60 s; an infinite loop is interrupted and graded as a failure, the batch goes on.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True

# A learner who deleted a test cell gets it back (and is graded on it) instead of silently skipping it.
c.OverwriteCells.add_missing_cells = True

# nbgrader scores a test cell 0 if it wrote anything to stderr. A library warning is not a wrong answer:
# drop stderr output that is a Python warning before grading. (The checks also silence warnings themselves,
# so Validate and the visible tests agree with the grade.)
c.IgnorePattern.pattern = r"\w*Warning\b"
c.IgnorePattern.enabled = True

# Keep feedback readable when a submission prints a lot or fails deep in a stack.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 60

# --- The term beyond grading (autograder/lms/; README, "For instructors") ---------------------------------------
# The roster: nbgrader ids and LMS identities, one CSV (columns in autograder/lms/roster.py). It holds personal
# data, so it lives in the git-ignored grading/ folder. `nbgrader db student import grading/roster.csv` reads it too.
c.Roster.path = "grading/roster.csv"

# Late penalties: on every autograde (plain `nbgrader autograde` and `python -m autograder grade` alike) nbgrader's
# AssignLatePenalties resets the penalty and asks this plugin again, so a regrade never keeps a stale one. A
# submission is late when its timestamp.txt is past the due date in the gradebook (`nbgrader db assignment add
# NAME --duedate=...`) plus the student's extension (formgrader, or Gradebook.grant_extension).
c.AssignLatePenalties.plugin_class = "autograder.lms.late.LatePenalty"
c.LatePenalty.grace_minutes = 15  # up to 15 minutes past the due date is on time (clocks and uploads differ)
c.LatePenalty.percent = 10  # percent of the earned score lost for every started unit late, counted from the due date
c.LatePenalty.per = "day"  # the unit: "day" (24 h) or "hour"
c.LatePenalty.max_percent = 50  # the most lateness can cost

# LMS downloads in: `python -m autograder.lms collect ASSIGNMENT submissions.zip` (or `nbgrader zip_collect
# ASSIGNMENT --force` with the zip in grading/downloaded/ASSIGNMENT/archive/) reads the LMS's file names, finds each
# student through the roster, keeps the latest of resubmitted files and lists the files that match no student.
c.ZipCollectApp.downloaded_directory = "grading/downloaded"
c.ZipCollectApp.extractor_plugin = "autograder.lms.collect.LmsExtractor"
c.ZipCollectApp.collector_plugin = "autograder.lms.collect.LmsCollector"
c.LmsDownload.lms = "canvas"  # whose download names: "canvas" or "moodle"
c.LmsExtractor.max_megabytes = 2048  # refuse a download that would unpack to more (students' own zips counted)

# Grades out: `python -m autograder.lms export --to canvas|moodle|csv ASSIGNMENT...` (or `nbgrader export
# --exporter=autograder.lms.export.CanvasExport`). A student with no submission gets a blank cell ("zero" for 0).
c.LmsExport.missing = "blank"
# The LMS's column header per assignment. For Canvas copy it from Canvas's own gradebook export, "Name (id)": Canvas
# finds the assignment by that id (without one it creates a new assignment). Example:
# c.LmsExport.columns = {"01-chain-rule": "Exercise 1: the chain rule (48213)"}
