"""An LMS's "download all submissions" zip into ``submitted/``, through nbgrader's ZipCollect and its plugins.

``nbgrader zip_collect`` extracts the archives in ``grading/downloaded/ASSIGNMENT/archive/`` (configured in
nbgrader_config.py) with an extractor plugin, then hands every extracted file to a collector plugin that says whose
it is and which notebook it is. The two plugins here read the names Canvas and Moodle give their downloads
(``c.LmsDownload.lms``) and find the student through the roster (:mod:`.roster`):

* **Canvas** names each file ``<sortable name>[_late]_<user id>_<attachment id>_<uploaded name>``; the user id is
  the roster's ``lms_user_id``. Canvas numbers attachments in upload order, so a later upload has a larger id.
* **Moodle** puts each student's files in a folder (or a name prefix) ``<First Last>_<participant>_assignsubmission
  _file_``; the participant number is per assignment, so the student is found by full name (roster ``first_name
  last_name``); two roster students with the same name are never guessed between.

Both LMSs rename a re-upload of the same file (Canvas ``01-chain-rule-1.ipynb``, Moodle or a browser ``01-chain-rule
(1).ipynb``), and a student uploaded into an archive of their own is extracted too. Resubmissions keep the latest:
of one student's files for one notebook, :class:`LmsExtractor` keeps the newest (Canvas: the largest attachment id;
Moodle: the last archive given, then the highest rename number) and removes the others before nbgrader collects.
Files that match no student are listed (:class:`LmsCollector`), never dropped in silence. An LMS download carries
no submission time, so nbgrader applies no late penalty to it (see README, "For instructors").
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from traitlets import Enum, Int
from traitlets.config import LoggingConfigurable

from .roster import Roster, Student, read_roster

CANVAS_NAME = re.compile(r"^(?P<name>.*?)(?P<late>_late)?_(?P<who>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.I)
MOODLE_NAME = re.compile(r"^(?P<who>.+)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.*)$")
RENAMED = re.compile(r"^(?P<stem>.+?)(?:-(?P<dash>\d+)| \((?P<paren>\d+)\))(?P<ext>\.[^.]+)$")
ARCHIVE_ORDER = re.compile(r"^(\d+)-")


class LmsDownload(LoggingConfigurable):
    """Which LMS made the download (``c.LmsDownload.lms``)."""

    lms = Enum(("canvas", "moodle"), default_value="canvas",
               help="The LMS whose download names to read: 'canvas' or 'moodle'.").tag(config=True)


@dataclass(frozen=True)
class Download:
    """What a downloaded file's path says: whose it is (in the LMS's terms) and what they uploaded."""

    who: str  # Canvas: the user id; Moodle: the full name
    uploaded: str  # the file name as uploaded (perhaps renamed by the LMS)
    order: tuple  # larger is later
    late: bool = False


def parse(relative: PurePath, lms: str) -> Download | None:
    """Read a path relative to the extracted folder (``ARCHIVE/.../FILE``); None if it is no LMS download name.

    The LMS's name is searched from the file upwards, so a student's own archive (extracted into a folder named
    after it) and Moodle's folders are read too."""
    parts = relative.parts
    match = ARCHIVE_ORDER.match(parts[0]) if len(parts) > 1 else None
    archive = int(match.group(1)) if match else 0
    for depth in range(len(parts) - 1, 0 if len(parts) > 1 else -1, -1):
        part = parts[depth]
        if lms == "canvas" and (m := CANVAS_NAME.match(part)):
            uploaded = m["file"] if depth == len(parts) - 1 else parts[-1]
            return Download(m["who"], uploaded, (int(m["attachment"]), archive), bool(m["late"]))
        if lms == "moodle" and (m := MOODLE_NAME.match(part)):
            uploaded = m["file"] if depth == len(parts) - 1 and m["file"] else parts[-1]
            return Download(" ".join(m["who"].split()), uploaded, (archive,))
    return None


def canonical(uploaded: str, notebooks: set[str]) -> tuple[str, int]:
    """The notebook a file is (``01-chain-rule-1.ipynb`` -> ``01-chain-rule.ipynb``) and its rename number."""
    if uploaded in notebooks:
        return uploaded, 0
    match = RENAMED.match(uploaded)
    if match and match["stem"] + match["ext"] in notebooks:
        return match["stem"] + match["ext"], int(match["dash"] or match["paren"])
    return uploaded, 0


class Lookup:
    """From an LMS identity to the roster's student (None, with the reason, when there is none or no single one)."""

    def __init__(self, roster: list[Student], lms: str):
        self.lms = lms
        self.by_key: dict[str, list[Student]] = defaultdict(list)
        for student in roster:
            key = student.lms_user_id if lms == "canvas" else student.full_name.casefold()
            if key:
                self.by_key[key].append(student)

    def find(self, who: str) -> tuple[Student | None, str]:
        found = self.by_key.get(who if self.lms == "canvas" else who.casefold(), [])
        if len(found) == 1:
            return found[0], ""
        if found:
            return None, f"{len(found)} roster students are named {who!r} ({', '.join(s.id for s in found)})"
        what = f"Canvas user {who} is not in the roster (lms_user_id)" if self.lms == "canvas" \
            else f"nobody named {who!r} in the roster (first_name last_name)"
        return None, what


@dataclass
class Context:
    """What both plugins need from the ZipCollect app they run in: the LMS, the roster, the notebooks, the folder."""

    lms: str
    lookup: Lookup
    notebooks: set[str]
    extracted: Path


def collect_folder(app, step: str) -> Path:
    """ZipCollect's folder for one step (``app.archive_directory`` or ``app.extracted_directory``)."""
    return Path(os.path.join(app.coursedir.root, app.collect_directory_structure).format(
        downloaded=app.downloaded_directory, assignment_id=app.coursedir.assignment_id, collect_step=step))


def context(plugin) -> Context:
    app = plugin.parent
    coursedir = app.coursedir
    lms = LmsDownload(parent=plugin).lms
    roster = read_roster(Path(coursedir.root) / Roster(parent=plugin).path)
    release = Path(coursedir.format_path(coursedir.release_directory, ".", coursedir.assignment_id))
    return Context(lms, Lookup(roster, lms), {p.name for p in release.glob("*.ipynb")},
                   collect_folder(app, app.extracted_directory))


@dataclass(frozen=True)
class Superseded:
    """An older upload of a notebook, removed in favour of a newer one."""

    dropped: str
    kept: str


class ArchiveRefused(ValueError):
    """An archive that would unpack to more than the extractor allows, or that cannot be read (named, with where it is
    inside the download, so the instructor can remove it and collect again)."""


def unpacked_size(archive, name: str, archives: tuple[str, ...] = (".zip", ".gz"), depth: int = 0) -> int:
    """Bytes the archive ``archive`` (a path or a file object, called ``name``) unpacks to, the archives inside it
    (names ending in ``archives``, nbgrader's ``zip_ext``) included, as nbgrader would unpack them; nothing is
    unpacked. Nesting deeper than 4 levels counts as too large."""
    if depth > 4:
        return 1 << 62
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(archive) as opened:
                return sum(unpacked_size(opened.open(i), f"{name}/{i.filename}", archives, depth + 1)
                           if i.filename.endswith(archives) else i.file_size for i in opened.infolist())
        with (tarfile.open(archive) if isinstance(archive, (str, Path)) else tarfile.open(fileobj=archive)) as opened:
            return sum(member.size for member in opened.getmembers())
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        raise ArchiveRefused(f"{name} cannot be unpacked ({error}); remove it from the download") from None


class LmsExtractor(ExtractorPlugin):
    """nbgrader's extractor (archives, and archives inside them), then only the newest upload of each notebook."""

    max_megabytes = Int(2048, help="Refuse a download that would unpack to more than this (a student's archive "
                                   "inside it included): submissions are hostile input.").tag(config=True)

    def extract(self, archive_path: str, extracted_path: str) -> None:
        for path in sorted(Path(archive_path).rglob("*")):
            if path.is_file() and path.name.endswith(tuple(self.zip_ext)):
                size = unpacked_size(path, path.name, tuple(self.zip_ext))
                if size > self.max_megabytes << 20:
                    raise ArchiveRefused(f"{path.name} would unpack to {size >> 20} MB, more than "
                                         f"c.LmsExtractor.max_megabytes = {self.max_megabytes}; nothing was unpacked")
        super().extract(archive_path, extracted_path)
        for path in list(Path(extracted_path).rglob("*")):  # a student's own archive, unpacked beside itself
            if path.is_file() and path.suffix in self.zip_ext and path.with_suffix("").is_dir():
                path.unlink()
        ctx = context(self)
        groups: dict[tuple[str, str], list[tuple[tuple, Path]]] = defaultdict(list)
        for path in sorted(Path(extracted_path).rglob("*")):
            download = parse(path.relative_to(extracted_path), ctx.lms) if path.is_file() else None
            if download is not None:
                notebook, renamed = canonical(download.uploaded, ctx.notebooks)
                groups[download.who, notebook].append((download.order + (renamed,), path))
        self.superseded: list[Superseded] = []
        for files in groups.values():
            files.sort(key=lambda item: item[0])
            kept = files[-1][1].relative_to(extracted_path).as_posix()
            for _, path in files[:-1]:
                self.superseded.append(Superseded(path.relative_to(extracted_path).as_posix(), kept))
                path.unlink()


@dataclass
class Collected:
    """What the collector saw, for the report."""

    students: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # id -> notebooks
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    not_notebooks: list[tuple[str, str]] = field(default_factory=list)  # (file, student)
    misnamed: list[tuple[str, str]] = field(default_factory=list)  # (student, name) not a notebook of the assignment
    late: set[str] = field(default_factory=set)  # students whose download the LMS marked late


class LmsCollector(FileNameCollectorPlugin):
    """nbgrader's collector for LMS download names: whose file it is (through the roster), and which notebook."""

    def collect(self, submitted_file: str) -> dict | None:
        if not hasattr(self, "ctx"):
            self.ctx, self.seen = context(self), Collected()
        path = Path(submitted_file)
        relative = path.relative_to(self.ctx.extracted) if path.is_relative_to(self.ctx.extracted) \
            else PurePath(path.name)
        download = parse(relative, self.ctx.lms)
        student, why = self.ctx.lookup.find(download.who) if download else \
            (None, f"not a {self.ctx.lms.capitalize()} download name")
        if student is None:
            self.seen.unmatched.append((relative.as_posix(), why))
            self.log.warning("matches no student: %s (%s)", relative.as_posix(), why)
            return None
        if path.suffix not in self.valid_ext:
            self.seen.not_notebooks.append((relative.as_posix(), student.id))
            return None
        notebook, _ = canonical(download.uploaded, self.ctx.notebooks)
        if notebook not in self.ctx.notebooks:
            self.seen.misnamed.append((student.id, download.uploaded))
        if download.late:
            self.seen.late.add(student.id)
        self.seen.students[student.id].append(notebook)
        return {"student_id": student.id, "file_id": notebook}


@dataclass
class Report:
    """One collect, for the instructor to read."""

    assignment: str
    collected: Collected
    superseded: list[Superseded]
    absent: list[str]  # roster students with nothing in the download

    def lines(self) -> list[str]:
        seen = self.collected
        lines = [f"{self.assignment}: collected {len(seen.students)} students into submitted/"]
        if self.superseded:
            lines.append("  resubmissions (kept the latest):")
            lines += [f"    {s.kept} (kept) over {s.dropped}" for s in self.superseded]
        if seen.unmatched:
            lines.append("  files that match no student (not collected):")
            lines += [f"    {name}: {why}" for name, why in seen.unmatched]
        if seen.not_notebooks:
            lines.append("  not notebooks (not collected): " + ", ".join(f"{n} ({s})" for n, s in seen.not_notebooks))
        if seen.misnamed:
            lines.append("  collected under a name the assignment does not have (the grader will report the notebook "
                         "missing): " + ", ".join(f"{s}: {n}" for s, n in seen.misnamed))
        if seen.late:
            lines.append("  marked late by the LMS (the download carries no time, so nbgrader adds no penalty; the "
                         "LMS's late policy applies): " + ", ".join(sorted(seen.late)))
        if self.absent:
            lines.append("  in the roster with nothing in the download: " + ", ".join(self.absent))
        return lines


def collect(assignment: str, archives: list[Path], lms: str | None = None) -> Report:
    """Put ``archives`` (in the order given: later ones win ties) through nbgrader's ZipCollect into submitted/.

    Runs in the current directory, the course root (nbgrader reads its configuration there); a student found in the
    download replaces their previous submission."""
    from nbgrader.apps import ZipCollectApp

    app = ZipCollectApp()
    app.initialize([assignment, "--force", "--log-level=ERROR",
                    f"--ZipCollectApp.extractor_plugin={LmsExtractor.__module__}.{LmsExtractor.__name__}",
                    f"--ZipCollectApp.collector_plugin={LmsCollector.__module__}.{LmsCollector.__name__}"])
    if lms:
        app.config.LmsDownload.lms = lms
    archive = collect_folder(app, app.archive_directory)
    shutil.rmtree(archive, ignore_errors=True)
    archive.mkdir(parents=True)
    for number, path in enumerate(archives, start=1):
        shutil.copy2(path, archive / f"{number:02d}-{Path(path).name}")
    app.start()
    collector, extractor = app.collector_plugin_inst, app.extractor_plugin_inst
    seen = getattr(collector, "seen", Collected())
    roster = read_roster(Path(app.coursedir.root) / Roster(parent=collector).path)
    absent = [s.id for s in roster if s.id not in seen.students]
    return Report(assignment, seen, getattr(extractor, "superseded", []), absent)
