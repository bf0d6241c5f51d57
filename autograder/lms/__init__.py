"""The instructor's term beyond grading: the roster, late penalties and extensions, LMS downloads in, grades out.

* :mod:`.roster`  the class roster (nbgrader ids, LMS identities, Moodle's participant numbers), one CSV;
* late penalties and extensions live with the grader (:mod:`autograder.grading.orchestration.late`; :mod:`.late`
                  keeps the old name for configurations);
* :mod:`.collect` Canvas's and Moodle's "download all submissions" zips into ``submitted/`` (nbgrader ZipCollect
                  plugins), nothing handed in ever lost;
* :mod:`.moodle`  Moodle's offline grading worksheet, read (participant numbers) and written (grades);
* :mod:`.export`  the gradebook into Canvas's or Moodle's grade import file (nbgrader export plugins);
* :mod:`.cli`     ``python -m autograder.lms collect|export|late|extend`` (see README, "For instructors").
"""
