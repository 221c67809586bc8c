"""Gradio's upload form read so that a refused or abandoned upload leaves no file and no traceback.

Gradio's upload route (``/gradio_api/upload``) parses the multipart form into temporary
files in its upload folder, then takes every part of the field ``files`` as a file. Requests
that fell between the two left the temporary files of the form's parts behind for good
(outside probes, sessions 39-42):

- a part of ``files`` that is a plain field (no ``filename``): Gradio's ``TypeError``, a 500;
- an upload whose sender went away before its end (a closed tab, a dropped link): Starlette's
  ``ClientDisconnect``, raised past Gradio's own clean-up, which covers only a malformed form;
- a file in a field other than ``files``: answered ``200 []``, its file never looked at again;
- a file named ``..``: Gradio's "Invalid file name" 400 after the parse, its file kept;
- a form cut short, its closing boundary missing though every byte its sender announced came:
  answered ``200 []`` with its parts unchecked and its last file kept (outside probe 138).

Each call with a file field (``gr.File`` of type ``filepath``) also made an empty temporary
file in Gradio's cache, never closed or removed (Gradio's ``File._process_single_file``: a
``NamedTemporaryFile`` whose name it overwrote): one more per press (outside probe 135).
`install` hands such a field its upload's path as Gradio did, without that file.

`install` wraps ``GradioMultiPartParser.parse`` (the one parser of every multipart route) so
that each ends as Gradio's own refusal of a malformed form (``MultiPartException``, answered 400
with its message) once the form's temporary files are removed. The upload form (the parse that
has an upload folder) takes parts in the field ``files`` only, each a file whose name is a
plain file name: not empty, no ``/``, no control character, not ``.`` or ``..``, which Gradio
renamed (an empty one too) without a word, kept as sent, or refused after keeping the file.
The browser sends a file's own name, never a path.
"""

from __future__ import annotations

import contextlib
import unicodedata
from pathlib import Path
from typing import NoReturn

from gradio import Error, File
from gradio.data_classes import FileData
from gradio.route_utils import GradioMultiPartParser, MultiPartException
from gradio.utils import NamedString
from gradio_client import utils as client_utils
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect

from storage.shown import shown

FIELD = "files"
"""The form field Gradio's upload route takes files from."""

NOT_A_FILE = (
    "Not stored: every part of the upload's field `files` must be a file (a part with a "
    "filename); part {index} is a plain field. Nothing was kept."
)
OTHER_FIELD = (
    "Not stored: the upload form has a part named {name}; files are taken only from the "
    "field `files`. Nothing was kept."
)
BAD_NAME = (
    "Not stored: file {index} is named {name}, which is not a plain file name (not empty, no "
    "`/`, no control character, not `.` or `..`). Nothing was kept."
)
ABANDONED = "Not stored: the upload ended before its last byte arrived. Nothing was kept."
UNENDED = (
    "Not stored: the upload form ended without its closing boundary, so its last part may be "
    "cut short. Nothing was kept."
)


def _remove(files) -> None:
    """Close and delete the temporary files (Python file objects) a parse made."""
    for file in files:
        with contextlib.suppress(OSError):
            file.close()
        Path(file.name).unlink(missing_ok=True)


async def _parse(self: GradioMultiPartParser, _parse_form=GradioMultiPartParser.parse):
    """`GradioMultiPartParser.parse`, refusing as a malformed form what it left half done."""
    ended = []
    self.on_end = lambda: ended.append(True)  # the parser reached the closing boundary
    try:
        form = await _parse_form(self)
    except MultiPartException:
        _progress_done(self)
        raise  # Gradio removed the form's files itself
    except ClientDisconnect:
        _refuse(self, ABANDONED)
    except BaseException:
        _remove(getattr(self, "_files_to_close_on_error", ()))
        _progress_done(self)
        raise
    if not ended:
        _refuse(self, UNENDED)
    refusal = _refusal(form) if self.upload_dir is not None else None
    if refusal is not None:
        _refuse(self, refusal)
    return form


def _refuse(self: GradioMultiPartParser, message: str) -> NoReturn:
    """Remove the form's temporary files, end its upload's progress, refuse it with `message`."""
    _remove(getattr(self, "_files_to_close_on_error", ()))
    _progress_done(self)
    raise MultiPartException(message) from None


def _progress_done(self: GradioMultiPartParser) -> None:
    """Mark the form's upload done for ``/upload_progress``, whose stream otherwise never ends."""
    if self.upload_progress is not None and self.upload_id is not None:
        self.upload_progress.set_done(self.upload_id)


def _refusal(form) -> str | None:
    """Why the upload route may not take `form` (a parsed multipart form), else None."""
    for name, _ in form.multi_items():
        if name != FIELD:
            return OTHER_FIELD.format(name=shown(name))
    for index, part in enumerate(form.getlist(FIELD), start=1):
        if not isinstance(part, UploadFile):
            return NOT_A_FILE.format(index=index)
        if not _plain(part.filename or ""):  # an empty name was stored under a made-up one
            return BAD_NAME.format(index=index, name=shown(part.filename or ""))
    return None


def _plain(name: str) -> bool:
    """Whether `name` is a plain file name: not empty, no ``/``, no control character (a
    NUL, an escape that would recolor a terminal showing it), not ``.`` or ``..``. Format
    characters (a right-to-left mark, a zero-width joiner) belong to real names: they are
    taken, and shown escaped where the app names the file."""
    return (
        "/" not in name
        and name not in ("", ".", "..")
        and not any(unicodedata.category(c) == "Cc" for c in name)
    )


def _file_field(self: File, f: FileData, _process=File._process_single_file):
    """`File._process_single_file` without the empty temporary file it left per call."""
    if self.type != "filepath":
        return _process(self, f)
    if self.file_types and not client_utils.is_valid_file(f.path, self.file_types):
        raise Error(
            f"Invalid file type. Please upload a file that is one of these formats: {self.file_types}"
        )
    return NamedString(f.path)


def install() -> None:
    """Read every multipart form of Gradio's routes with `_parse`, and every file field's
    value with `_file_field` (the whole process). Idempotent."""
    if GradioMultiPartParser.parse is not _parse:
        GradioMultiPartParser.parse = _parse
    if File._process_single_file is not _file_field:
        File._process_single_file = _file_field
