"""nbgrader configuration: the repository root is the course directory.

Sources (with solutions and hidden tests) live in ``solutions/``; ``nbgrader generate_assignment`` writes the
student release to ``exercises/``, which is committed. Everything an instructor's grading creates (``submitted/``,
``autograded/``, ``feedback/``, ``gradebook.db``, the exchange in ``.exchange/``) stays inside the repository and
is git-ignored, so nothing depends on ``~/.jupyter`` or system paths.
"""

import os

from autograder.course import COURSE_ID

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = COURSE_ID
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

# Feedback explains the mistakes the tests named: while a learner works, a failing test names a likely misconception
# and asks a question; what the mistake is and what to do instead is added here, after grading
# (autograder/feedback.py).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades", "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "autograder.feedback.ExplainMistakes", "autograder.export.MathToMathML",
]
# ... on a page for everyone (autograder/templates/autograd_feedback: its language, AA contrast, formulas as MathML).
try:
    from autograder.export import feedback_template_dirs

    c.HTMLExporter.template_name = "autograd_feedback"
    c.HTMLExporter.extra_template_basedirs = feedback_template_dirs()
except ImportError:  # a course folder used without the course package: nbgrader's own feedback page
    pass

# Keep feedback readable when a submission prints a lot or fails deep in a stack.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 60

# --- The term beyond grading (autograder/lms/; README, "For instructors") ---------------------------------------
# The roster: nbgrader ids and LMS identities, one CSV (columns in autograder/lms/roster.py; Moodle's participant
# numbers in one column per assignment, participant:ASSIGNMENT, filled by `collect --worksheet`). It holds personal
# data, so it lives in the git-ignored grading/ folder. `nbgrader db student import grading/roster.csv` reads it too.
c.Roster.path = "grading/roster.csv"

# Late penalties: on every autograde (plain `nbgrader autograde` and `python -m autograder grade` alike) nbgrader's
# AssignLatePenalties resets the penalty and asks this plugin again, so a regrade never keeps a stale one. A
# submission is late when its timestamp.txt is past the due date in the gradebook (`nbgrader db assignment add
# NAME --duedate=...`) plus the student's extension (`python -m autograder.lms extend ASSIGNMENT STUDENT --days N`,
# kept in c.LatePenalty.extensions until the submission is in the gradebook).
c.AssignLatePenalties.plugin_class = "autograder.grading.orchestration.late.LatePenalty"
c.LatePenalty.grace_minutes = 15  # up to 15 minutes past the due date is on time (clocks and uploads differ)
c.LatePenalty.percent = 10  # percent of the earned score lost for every started unit late, counted from the due date
c.LatePenalty.per = "day"  # the unit: "day" (24 h) or "hour"
c.LatePenalty.max_percent = 50  # the most lateness can cost
c.LatePenalty.extensions = "grading/extensions.csv"  # extensions granted with `python -m autograder.lms extend`

# LMS downloads in: `python -m autograder.lms collect ASSIGNMENT submissions.zip` (or `nbgrader zip_collect
# ASSIGNMENT --force` with the zip in grading/downloaded/ASSIGNMENT/archive/) reads the LMS's file names, finds each
# student through the roster (Canvas: user id; Moodle: participant number), keeps the latest of resubmitted files,
# keeps every download and every replaced folder under grading/downloaded/ASSIGNMENT/, and lists what it set aside.
c.ZipCollectApp.downloaded_directory = "grading/downloaded"
c.ZipCollectApp.extractor_plugin = "autograder.lms.collect.LmsExtractor"
c.ZipCollectApp.collector_plugin = "autograder.lms.collect.LmsCollector"
c.LmsDownload.lms = "canvas"  # whose download names: "canvas" or "moodle"
c.LmsDownload.replace = False  # True: files that are not a usable notebook replace a usable earlier submission
c.LmsExtractor.max_megabytes = 2048  # refuse a download that would unpack to more (students' own zips counted)

# Grades out: `python -m autograder.lms export --to canvas|moodle|moodle-csv|csv ASSIGNMENT...` (or `nbgrader export
# --exporter=autograder.lms.export.CanvasExport`). A student with no submission is left out of the file: a blank
# cell would clear a grade in the LMS ("zero" writes 0 instead).
c.LmsExport.missing = "omit"
# The LMS's column header per assignment. Canvas finds the assignment by the id in "Title (id)" and requires it
# (without one it would match the title or create a new assignment); `--canvas-id` gives it on the command line:
# c.LmsExport.columns = {"01-chain-rule": "Exercise 1: the chain rule (48213)"}
# The LMS assignment's points possible, to rescale nbgrader's points (or `--percent`; Moodle's worksheet knows its
# own maximum grade): c.LmsExport.points_possible = {"01-chain-rule": 100}
