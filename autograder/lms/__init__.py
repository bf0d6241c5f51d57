"""The instructor's term beyond grading: the roster, late penalties, LMS downloads in, grades out to the LMS.

* :mod:`.roster`  the class roster (nbgrader ids and LMS identities), one CSV;
* :mod:`.late`    the late-penalty policy, an nbgrader late-submission plugin configured in nbgrader_config.py;
* :mod:`.collect` Canvas's and Moodle's "download all submissions" zips into ``submitted/`` (nbgrader ZipCollect
                  plugins);
* :mod:`.export`  the gradebook into Canvas's or Moodle's grade import CSV (nbgrader export plugins);
* :mod:`.cli`     ``python -m autograder.lms collect|export`` (see README, "For instructors").
"""
