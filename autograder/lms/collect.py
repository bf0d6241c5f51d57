"""An LMS's "download all submissions" zip into ``submitted/``, through nbgrader's ZipCollect and its plugins.

``nbgrader zip_collect`` extracts the archives in ``grading/downloaded/ASSIGNMENT/<archive directory>/`` with an
extractor plugin, then hands every extracted file to a collector plugin that says whose it is and which notebook it
is. The two plugins here read the names Canvas and Moodle give their downloads (``c.LmsDownload.lms``) and find the
student through the roster (:mod:`.roster`):

* **Canvas** names each file ``<sortable name>[_late]_<user id>_<attachment id>_<uploaded name>``; the user id is
  the roster's ``lms_user_id``. Canvas numbers attachments in upload order, so a later upload has a larger id.
* **Moodle** puts each student's files in a folder ``<Full Name>_<participant>_assignsubmission_file`` (Moodle 4.1
  and later: ``mod/assign/classes/downloader.php``, ``clean_filename($prefix . '_' . $subtype . '_' . $type)``; before
  4.1 the folder ended in ``_``, and with "download as folders" off the prefix is part of each file name). The
  student is found by the participant number, never by the name: Moodle's ``clean_filename`` strips characters such
  as ``'`` from names, a site may order names differently, and blind marking writes "Participant" instead. The number
  is per assignment (the roster's ``participant:ASSIGNMENT`` column, filled from Moodle's grading worksheet).

Both LMSs rename a re-upload of the same file (Canvas ``01-chain-rule-1.ipynb``, Moodle or a browser ``01-chain-rule
(1).ipynb``), and a student's own archive is unpacked. Of one student's files for one notebook :class:`LmsExtractor`
keeps the newest (Canvas: the largest attachment id; Moodle: the last archive given, then the highest rename number).

Nothing an instructor hands in is lost:

* every download given to :func:`collect` is kept, unchanged, in ``grading/downloaded/ASSIGNMENT/downloads/<download
  time>/`` (the newest modification time of the files given, UTC), and nothing there is ever removed;
* a student's earlier folder in ``submitted/`` is copied to ``grading/downloaded/ASSIGNMENT/replaced/<run>/<student>/``
  before the download replaces it;
* a later download never replaces a usable earlier submission with an unusable one (a notebook under a name the
  assignment does not have, a file that is not a notebook, an archive that cannot be unpacked): the student keeps the
  earlier one and the new files are set aside in ``grading/downloaded/ASSIGNMENT/set-aside/<run>/`` with the reason,
  unless ``c.LmsDownload.replace`` (``collect --replace``);
* an archive of one student that cannot be unpacked, would unpack to too much, or holds a path outside its folder
  (``../``, an absolute path, a link) is set aside with its reason; the rest of the class is collected;
* a download that cannot be unpacked at all is refused (:class:`DownloadRefused`), named as the file given.

An LMS download carries no submission time. A student whose folder a download replaces has no ``timestamp.txt`` and
the gradebook forgets the time it had (an exchange submission's, say), so the penalty of the submission graded is
never the time of another one: the LMS applies its own late policy (see README, "For instructors").
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePath, PurePosixPath

from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from traitlets import Bool, Enum, Int
from traitlets.config import LoggingConfigurable

from .roster import PARTICIPANT, Roster, Student, read_roster

CANVAS_NAME = re.compile(r"^(?P<name>.*?)(?P<late>_late)?_(?P<who>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.I)
MOODLE_NAME = re.compile(r"^(?P<name>.+)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?:_(?P<file>.*))?$")
RENAMED = re.compile(r"^(?P<stem>.+?)(?:-(?P<dash>\d+)| \((?P<paren>\d+)\))(?P<ext>\.[^.]+)$")
ARCHIVE_ORDER = re.compile(r"^(\d+)-")
ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")
#: Beside the copies of the downloads in a run's folder: which file the instructor gave for each copy.
MANIFEST = "given.json"
#: How deep archives inside archives are unpacked.
MAX_NESTING = 4


class LmsDownload(LoggingConfigurable):
    """Which LMS made the download (``c.LmsDownload.lms``), and whether an unusable later file may replace a usable
    earlier submission (``c.LmsDownload.replace``, ``collect --replace``)."""

    lms = Enum(("canvas", "moodle"), default_value="canvas",
               help="The LMS whose download names to read: 'canvas' or 'moodle'.").tag(config=True)
    replace = Bool(False, help="Let a later download replace a student's usable submission with files that are not "
                               "a usable notebook of the assignment (normally they are set aside).").tag(config=True)


@dataclass(frozen=True)
class Download:
    """What a downloaded file's path says: whose it is (in the LMS's terms) and what they uploaded."""

    who: str  # Canvas: the user id; Moodle: the participant number
    uploaded: str  # the file name as uploaded (perhaps renamed by the LMS)
    order: tuple  # larger is later
    late: bool = False
    name: str = ""  # the name in the download (for people; never used to find a student)


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
            return Download(m["who"], uploaded, (int(m["attachment"]), archive), bool(m["late"]), m["name"])
        if lms == "moodle" and (m := MOODLE_NAME.match(part)):
            uploaded = m["file"] if depth == len(parts) - 1 and m["file"] else parts[-1]
            return Download(m["participant"], uploaded, (archive,), name=" ".join(m["name"].split()))
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
    """From an LMS identity to the roster's student (None, with the reason, when there is none or no single one).

    Canvas: the user id (roster ``lms_user_id``). Moodle: the participant number of this assignment (roster
    ``participant:ASSIGNMENT``)."""

    def __init__(self, roster: list[Student], lms: str, assignment: str):
        self.lms, self.assignment = lms, assignment
        self.by_key: dict[str, list[Student]] = defaultdict(list)
        for student in roster:
            key = student.lms_user_id if lms == "canvas" else student.participant(assignment)
            if key:
                self.by_key[key].append(student)

    def find(self, download: Download) -> tuple[Student | None, str]:
        found = self.by_key.get(download.who, [])
        if len(found) == 1:
            return found[0], ""
        if found:
            return None, f"{len(found)} roster students have {download.who} ({', '.join(s.id for s in found)})"
        if self.lms == "canvas":
            return None, f"Canvas user {download.who} is not in the roster (lms_user_id)"
        column = PARTICIPANT + self.assignment
        if not self.by_key:
            return None, (f"participant {download.who} ({download.name}): the roster has no {column} column yet "
                          "(give Moodle's grading worksheet: collect --worksheet FILE)")
        return None, f"participant {download.who} ({download.name}) is not in the roster's {column} column"


@dataclass
class Context:
    """What both plugins need from the ZipCollect app they run in."""

    lms: str
    assignment: str
    lookup: Lookup
    notebooks: set[str]
    extracted: Path
    root: Path  # the course root
    submitted: Path  # submitted/STUDENT/ASSIGNMENT with STUDENT as "{student}"
    db_url: str


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
    assignment = coursedir.assignment_id
    return Context(lms, assignment, Lookup(roster, lms, assignment), {p.name for p in release.glob("*.ipynb")},
                   collect_folder(app, app.extracted_directory), Path(coursedir.root),
                   Path(coursedir.format_path(coursedir.submitted_directory, "{student}", assignment)),
                   coursedir.db_url)


class DownloadRefused(ValueError):
    """A download (a file the instructor gave) that cannot be collected at all: the message names it and why."""



class Unpackable(ValueError):
    """One archive cannot be unpacked safely (the message says why)."""


def archive_kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith((".tar.gz", ".tgz", ".tar")):
        return "tar"
    return None


def archive_stem(name: str) -> str:
    lower = name.lower()
    for ext in ARCHIVES:
        if lower.endswith(ext):
            return name[: -len(ext)]
    return name


def safe_member(name: str) -> PurePosixPath:
    """The relative path an archive member may be written to; :class:`Unpackable` for an absolute path, a drive, or
    a ``..`` that would leave the archive's folder."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (path.parts and ":" in path.parts[0]) or ".." in path.parts:
        raise Unpackable(f"member {name!r} would be written outside its folder; refused")
    return path


def _copy_limited(source, target: Path, size: int, name: str) -> None:
    written = 0
    with target.open("wb") as out:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > size:
                raise Unpackable(f"member {name!r} unpacks to more than the {size} bytes it declares")
            out.write(chunk)


def unpack(archive: Path, into: Path, budget: int, refused: list[tuple[str, str]] | None = None) -> int:
    """Unpack ``archive`` into the folder ``into``, regular files only; return the bytes written.

    A member that would leave the folder, is a link or a device, or cannot be read is :class:`Unpackable` with
    nothing written, or, when ``refused`` is a list, is left out and added to it as (member, reason) while the
    others are unpacked (a download of a whole class: one student's file never stops the others). More than
    ``budget`` bytes in all, or an archive that cannot be opened, is always :class:`Unpackable`."""
    def refuse(name: str, reason: str) -> None:
        if refused is None:
            raise Unpackable(f"member {name!r} {reason}; refused")
        refused.append((name, reason))

    kind = archive_kind(archive.name)
    try:
        opened = zipfile.ZipFile(archive) if kind == "zip" else tarfile.open(archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, zlib.error, OSError,
            NotImplementedError, RuntimeError) as error:
        raise Unpackable(f"it cannot be unpacked ({error})") from None
    with opened:
        plan = []  # (name, path, size, is a folder, open the member)
        try:
            members = opened.infolist() if kind == "zip" else opened.getmembers()
        except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
            raise Unpackable(f"it cannot be unpacked ({error})") from None
        for member in members:
            name = member.filename if kind == "zip" else member.name
            try:
                path = safe_member(name)
            except Unpackable:
                refuse(name, "would be written outside its folder")
                continue
            if kind == "zip":
                if stat.S_ISLNK(member.external_attr >> 16):
                    refuse(name, "is a link")
                    continue
                plan.append((name, path, member.file_size, member.is_dir(), lambda m=member: opened.open(m)))
            else:
                if not (member.isreg() or member.isdir()):
                    refuse(name, "is a link or a device")
                    continue
                plan.append((name, path, member.size, member.isdir(), lambda m=member: opened.extractfile(m)))
        total = sum(size for _, _, size, folder, _ in plan if not folder)
        if total > budget:
            raise Unpackable(f"it would unpack to {total >> 20} MB, more than the {budget >> 20} MB left under "
                             "c.LmsExtractor.max_megabytes")
        into.mkdir(parents=True, exist_ok=True)
        for name, path, size, folder, source in plan:
            target = into.joinpath(*path.parts) if path.parts else into
            if folder:
                target.mkdir(parents=True, exist_ok=True)
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with source() as stream:
                    _copy_limited(stream, target, size, name)
            except Unpackable:
                target.unlink(missing_ok=True)
                refuse(name, f"unpacks to more than the {size} bytes it declares")
            except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError, NotImplementedError,
                    RuntimeError) as error:
                if target.is_file():
                    target.unlink()
                if refused is None:
                    raise Unpackable(f"it cannot be unpacked ({error})") from None
                refused.append((name, f"cannot be read ({error})"))
        return total


def notebook_problem(path: Path) -> str:
    """Why the file at ``path`` is not a usable notebook ("" when it is one: JSON with cells and nbformat)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        return f"not a notebook ({type(error).__name__}: {str(error)[:80]})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "nbformat" not in data:
        return "not a notebook (JSON without cells)"
    return ""


@dataclass(frozen=True)
class Superseded:
    """An older upload of a notebook, removed in favour of a newer one (the download keeps it)."""

    dropped: str
    kept: str


@dataclass(frozen=True)
class SetAside:
    """Files of a download that were not collected, where they are kept, and why."""

    path: str  # as in the download (file given / path inside it)
    student: str  # roster id, or "" when the file matched no one
    reason: str
    kept_in: str  # relative to the course root


@dataclass
class Record:
    """What one run of the extractor did (per run: a new extractor, a new record)."""

    run: str  # the run's name: the time it started, UTC
    superseded: list[Superseded] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    kept_earlier: dict[str, str] = field(default_factory=dict)  # student -> why their earlier submission stays
    replaced: dict[str, str] = field(default_factory=dict)  # student -> where their earlier folder was copied
    times_dropped: dict[str, str] = field(default_factory=dict)  # student -> the time the gradebook forgot


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H%M%SZ")


def forget_times(db_url: str, assignment: str, students: list[str]) -> dict[str, str]:
    """Remove the submission time the gradebook holds for ``students`` (their folder now holds an LMS download,
    which has none); return the times removed."""
    from nbgrader.api import Gradebook, MissingEntry

    path = db_url.removeprefix("sqlite:///")
    if not students or (db_url.startswith("sqlite:///") and not Path(path).exists()):
        return {}
    forgotten = {}
    with Gradebook(db_url) as gradebook:
        for student in students:
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                continue
            if submission.timestamp is not None:
                forgotten[student] = f"{submission.timestamp:%Y-%m-%d %H:%M} UTC"
                submission.timestamp = None
        gradebook.db.commit()
    return forgotten


class LmsExtractor(ExtractorPlugin):
    """The downloads unpacked safely (archives inside them too), the newest upload of each notebook kept, and each
    student's earlier submission protected (see the module's docstring)."""

    max_megabytes = Int(2048, help="Refuse a download that would unpack to more than this (a student's archive "
                                   "inside it included): submissions are hostile input.").tag(config=True)

    def extract(self, archive_path: str, extracted_path: str) -> None:
        archive, extracted = Path(archive_path), Path(extracted_path)
        manifest = json.loads((archive / MANIFEST).read_text()) if (archive / MANIFEST).exists() else {}
        self._given = given = manifest.get("given", {})  # copy name -> the file the instructor gave
        self.record = record = Record(manifest.get("run") or stamp(datetime.now(UTC)))
        ctx = context(self)
        self.set_aside_folder = collect_folder(self.parent, "set-aside") / record.run
        budget = self.max_megabytes << 20
        for path in sorted(archive.iterdir()):
            if not path.is_file() or path.name == MANIFEST:
                continue
            label = given.get(path.name, str(path))
            if archive_kind(path.name) is None:
                shutil.copy2(path, extracted / path.name)
                continue
            target = extracted / archive_stem(path.name)
            refused: list[tuple[str, str]] = []
            try:
                budget -= unpack(path, target, budget, refused)
            except Unpackable as error:
                shutil.rmtree(target, ignore_errors=True)
                raise DownloadRefused(f"{label}: {error}; nothing was collected from it") from None
            for member, reason in refused:
                parts = [p for p in PurePosixPath(member.replace("\\", "/")).parts if p not in ("/", "..")]
                student = self._student(ctx, PurePath(archive_stem(path.name), *parts))
                record.set_aside.append(SetAside(f"{Path(label).name}: member {member!r}", student,
                                                 f"{reason}; refused", f"the download kept ({path.name})"))
        self._unpack_students_archives(ctx, extracted, budget)
        self._keep_newest(ctx, extracted)
        self._protect_earlier(ctx, extracted)

    def _label(self, relative: PurePath, given: dict[str, str]) -> str:
        """A path in the extracted folder as the instructor knows it: the file they gave, then the path inside."""
        first = relative.parts[0]
        for copy, original in given.items():
            if archive_stem(copy) == first:
                return "/".join([Path(original).name, *relative.parts[1:]])
        return relative.as_posix()

    def _set_aside(self, ctx: Context, path: Path, extracted: Path, student: str, reason: str) -> None:
        relative = path.relative_to(extracted)
        target = self.set_aside_folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), target)
        self.record.set_aside.append(SetAside(self._label(relative, self._given), student, reason,
                                              os.path.relpath(target, ctx.root)))

    def _student(self, ctx: Context, relative: PurePath) -> str:
        download = parse(relative, ctx.lms)
        return (ctx.lookup.find(download)[0] or Student("")).id if download else ""

    def _unpack_students_archives(self, ctx: Context, extracted: Path, budget: int) -> None:
        for depth in range(MAX_NESTING + 1):
            inner = sorted(p for p in extracted.rglob("*") if p.is_file() and archive_kind(p.name))
            for path in inner:
                student = self._student(ctx, path.relative_to(extracted))
                if depth == MAX_NESTING:
                    self._set_aside(ctx, path, extracted, student, f"archives nested more than {MAX_NESTING} deep")
                    continue
                target = path.parent / archive_stem(path.name)
                try:
                    budget -= unpack(path, target, budget)
                    path.unlink()
                except Unpackable as error:
                    shutil.rmtree(target, ignore_errors=True)
                    self._set_aside(ctx, path, extracted, student, str(error))
            if not inner:
                break

    def _keep_newest(self, ctx: Context, extracted: Path) -> None:
        groups: dict[tuple[str, str], list[tuple[tuple, Path]]] = defaultdict(list)
        for path in sorted(extracted.rglob("*")):
            download = parse(path.relative_to(extracted), ctx.lms) if path.is_file() else None
            if download is not None:
                notebook, renamed = canonical(download.uploaded, ctx.notebooks)
                groups[download.who, notebook].append((download.order + (renamed,), path))
        for files in groups.values():
            files.sort(key=lambda item: item[0])
            kept = self._label(files[-1][1].relative_to(extracted), self._given)
            for _, path in files[:-1]:
                self.record.superseded.append(Superseded(self._label(path.relative_to(extracted), self._given), kept))
                path.unlink()

    def _protect_earlier(self, ctx: Context, extracted: Path) -> None:
        """Per student in the download: keep a usable earlier submission rather than take unusable files; copy the
        earlier folder aside before the download replaces it; forget the earlier submission time."""
        files: dict[str, list[tuple[Path, Download]]] = defaultdict(list)
        for path in sorted(extracted.rglob("*")):
            download = parse(path.relative_to(extracted), ctx.lms) if path.is_file() else None
            student = ctx.lookup.find(download)[0] if download else None
            if student is not None:
                files[student.id].append((path, download))
        replace = LmsDownload(parent=self).replace
        valid_ext = tuple(getattr(self.parent.collector_plugin_inst, "valid_ext", [".ipynb"])) \
            if hasattr(self.parent, "collector_plugin_inst") else (".ipynb",)
        replaced = []
        for student, found in sorted(files.items()):
            earlier = Path(str(ctx.submitted).format(student=student))
            problems, usable = [], set()
            for path, download in found:
                notebook, _ = canonical(download.uploaded, ctx.notebooks)
                problem = ("a name the assignment does not have" if notebook not in ctx.notebooks
                           else notebook_problem(path))
                if problem:
                    problems.append(f"{download.uploaded}: {problem}")
                else:
                    usable.add(notebook)
            had = {n for n in ctx.notebooks if (earlier / n).is_file() and not notebook_problem(earlier / n)}
            if had - usable and not replace:
                lost = ", ".join(sorted(had - usable))
                why = "; ".join(problems) or "no notebook"
                self.record.kept_earlier[student] = (f"the new download has no usable {lost} ({why}); collect "
                                                     "--replace takes it")
                for path, _ in found:
                    self._set_aside(ctx, path, extracted, student, f"not usable, and {student}'s earlier {lost} is")
                continue
            if not any(path.suffix in valid_ext for path, _ in found):
                continue  # nothing of theirs will be collected: their folder stays as it is
            if earlier.is_dir():
                copy = collect_folder(self.parent, "replaced") / self.record.run / student
                if copy.exists():
                    shutil.rmtree(copy)
                shutil.copytree(earlier, copy)
                self.record.replaced[student] = os.path.relpath(copy, ctx.root)
            replaced.append(student)
        self.record.times_dropped = forget_times(ctx.db_url, ctx.assignment, replaced)


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
        student, why = self.ctx.lookup.find(download) if download else \
            (None, f"not a {self.ctx.lms.capitalize()} download name")
        extractor = getattr(self.parent, "extractor_plugin_inst", None)
        name = extractor._label(relative, getattr(extractor, "_given", {})) if hasattr(extractor, "_label") \
            else relative.as_posix()
        if student is None:
            self.seen.unmatched.append((name, why))
            self.log.warning("matches no student: %s (%s)", name, why)
            return None
        if path.suffix not in self.valid_ext:
            self.seen.not_notebooks.append((name, student.id))
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
    record: Record
    absent: list[str]  # roster students with nothing in the download
    kept_in: str = ""  # where the downloads given are kept
    worksheet: list[str] = field(default_factory=list)  # what reading Moodle's grading worksheet did

    @property
    def superseded(self) -> list[Superseded]:
        return self.record.superseded

    @property
    def needs_a_look(self) -> bool:
        """Files that were not collected (exit status 1)."""
        return bool(self.collected.unmatched or self.record.set_aside)

    def lines(self) -> list[str]:
        seen, record = self.collected, self.record
        lines = list(self.worksheet)
        if self.kept_in:
            lines.append(f"the download is kept in {self.kept_in}")
        lines.append(f"{self.assignment}: collected {len(seen.students)} students into submitted/")
        if record.superseded:
            lines.append("  resubmissions (kept the latest):")
            lines += [f"    {s.kept} (kept) over {s.dropped}" for s in record.superseded]
        if record.replaced:
            lines.append("  earlier submissions replaced by the download (copied first): "
                         + ", ".join(f"{s} -> {where}" for s, where in sorted(record.replaced.items())))
        if record.times_dropped:
            lines.append("  submission times no longer used (the download has none; the LMS's late policy applies): "
                         + ", ".join(f"{s} ({t})" for s, t in sorted(record.times_dropped.items())))
        if record.kept_earlier:
            lines.append("  kept the earlier submission (the new files are set aside):")
            lines += [f"    {s}: {why}" for s, why in sorted(record.kept_earlier.items())]
        if record.set_aside:
            lines.append("  set aside (not collected; kept with the reason):")
            lines += [f"    {a.path}" + (f" ({a.student})" if a.student else "") + f": {a.reason} -> {a.kept_in}"
                      for a in record.set_aside]
        if seen.unmatched:
            lines.append("  files that match no student (not collected; the download keeps them):")
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
            lines.append("  in the roster with nothing collected from the download: " + ", ".join(self.absent))
        return lines


def keep_downloads(folder: Path, archives: list[Path]) -> tuple[str, Path]:
    """Copy the downloads given into ``folder/<download time>/`` (``NN-name``, in the order given, with a manifest
    naming the originals); the same downloads given again reuse their folder. Return (run name, folder)."""
    newest = max(datetime.fromtimestamp(Path(a).stat().st_mtime, UTC) for a in archives)
    name = stamp(newest)
    for attempt in range(1, 1000):
        run = name if attempt == 1 else f"{name}-{attempt}"
        target = folder / run
        copies = [target / f"{number:02d}-{Path(a).name}" for number, a in enumerate(archives, start=1)]
        if not target.exists():
            break
        if sorted(p.name for p in target.iterdir() if p.name != MANIFEST) == sorted(c.name for c in copies) and \
                all(filecmp.cmp(c, a, shallow=False) for c, a in zip(copies, archives)):
            return run, target
    target.mkdir(parents=True)
    for copy, original in zip(copies, archives):
        shutil.copy2(original, copy)
    (target / MANIFEST).write_text(json.dumps({"run": run, "given": {c.name: str(a) for c, a in zip(copies, archives)}},
                                              indent=1))
    return run, target


def collect(assignment: str, archives: list[Path], lms: str | None = None, replace: bool = False,
            worksheet: list[str] | None = None) -> Report:
    """Put ``archives`` (in the order given: later ones win ties) through nbgrader's ZipCollect into submitted/.

    Runs in the current directory, the course root (nbgrader reads its configuration there). The downloads are kept
    in ``grading/downloaded/ASSIGNMENT/downloads/``; see the module's docstring for what else is kept."""
    from nbgrader.apps import ZipCollectApp

    probe = ZipCollectApp()
    probe.initialize([assignment, "--log-level=ERROR"])
    downloads = Path(os.path.join(probe.coursedir.root, probe.collect_directory_structure).format(
        downloaded=probe.downloaded_directory, assignment_id=assignment, collect_step="downloads"))
    run, folder = keep_downloads(downloads, [Path(a) for a in archives])
    app = ZipCollectApp()
    app.initialize([assignment, "--force", "--log-level=ERROR", f"--ZipCollectApp.archive_directory=downloads/{run}",
                    f"--ZipCollectApp.extractor_plugin={LmsExtractor.__module__}.{LmsExtractor.__name__}",
                    f"--ZipCollectApp.collector_plugin={LmsCollector.__module__}.{LmsCollector.__name__}"])
    if lms:
        app.config.LmsDownload.lms = lms
    if replace:
        app.config.LmsDownload.replace = True
    app.start()
    collector, extractor = app.collector_plugin_inst, app.extractor_plugin_inst
    seen = getattr(collector, "seen", Collected())
    roster = read_roster(Path(app.coursedir.root) / Roster(parent=collector).path)
    absent = [s.id for s in roster if s.id not in seen.students]
    return Report(assignment, seen, getattr(extractor, "record", Record(run)), absent,
                  os.path.relpath(folder, app.coursedir.root), worksheet or [])
