"""Gradio's upload form read so that a refused or abandoned upload leaves no file and no traceback.

Gradio's upload route (``/gradio_api/upload``) parses the multipart form into temporary
files in its upload folder, then takes every part of the field ``files`` as a file. Two
requests fell between the two, each a 500 with a traceback in the log and the temporary
files of the form's other parts left behind for good (outside probes, sessions 39-41):

- a part of ``files`` that is a plain field (no ``filename``): Gradio's ``TypeError``;
- an upload whose sender went away before its end (a closed tab, a dropped link): Starlette's
  ``ClientDisconnect``, raised past Gradio's own clean-up, which covers only a malformed form.

`install` wraps ``GradioMultiPartParser.parse`` (the one parser of every multipart route) so
that both end as Gradio's own refusal of a malformed form (``MultiPartException``, answered 400
with its message) once the form's temporary files are removed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from gradio.route_utils import GradioMultiPartParser, MultiPartException
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect

FIELD = "files"
"""The form field Gradio's upload route takes files from."""

NOT_A_FILE = (
    "Not stored: every part of the upload's field `files` must be a file (a part with a "
    "filename); part {index} is a plain field. Nothing was kept."
)
ABANDONED = "Not stored: the upload ended before its last byte arrived. Nothing was kept."


def _remove(files) -> None:
    """Close and delete the temporary files (Python file objects) a parse made."""
    for file in files:
        with contextlib.suppress(OSError):
            file.close()
        Path(file.name).unlink(missing_ok=True)


async def _parse(self: GradioMultiPartParser, _parse_form=GradioMultiPartParser.parse):
    """`GradioMultiPartParser.parse`, refusing as a malformed form what it left half done."""
    try:
        form = await _parse_form(self)
    except MultiPartException:
        raise  # Gradio removed the form's files itself
    except ClientDisconnect:
        _remove(getattr(self, "_files_to_close_on_error", ()))
        raise MultiPartException(ABANDONED) from None
    except BaseException:
        _remove(getattr(self, "_files_to_close_on_error", ()))
        raise
    parts = form.getlist(FIELD)
    for index, part in enumerate(parts, start=1):
        if not isinstance(part, UploadFile):
            _remove(getattr(self, "_files_to_close_on_error", ()))
            raise MultiPartException(NOT_A_FILE.format(index=index))
    return form


def install() -> None:
    """Read every multipart form of Gradio's routes with `_parse` (the whole process). Idempotent."""
    if GradioMultiPartParser.parse is not _parse:
        GradioMultiPartParser.parse = _parse
