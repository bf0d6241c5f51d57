"""The instructor's term beyond grading: the roster, late penalties and extensions, LMS downloads in, grades out.

* :mod:`.roster`  the class roster (nbgrader ids, LMS identities, Moodle's participant numbers), one CSV;
* :mod:`.late`    the late-penalty policy, an nbgrader late-submission plugin configured in nbgrader_config.py, and
                  extensions granted at any time;
* :mod:`.collect` Canvas's and Moodle's "download all submissions" zips into ``submitted/`` (nbgrader ZipCollect
                  plugins), nothing handed in ever lost;
* :mod:`.moodle`  Moodle's offline grading worksheet, read (participant numbers) and written (grades);
* :mod:`.export`  the gradebook into Canvas's or Moodle's grade import file (nbgrader export plugins);
* :mod:`.cli`     ``python -m autograder.lms collect|export|late|extend`` (see README, "For instructors").
"""
