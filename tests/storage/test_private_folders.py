"""The folders made for a new database and its lock file are its owner's alone, whichever
is made first (the app takes the lock before it opens the database)."""

from __future__ import annotations

import os
import stat

import pytest

from storage import open_db, serving


@pytest.fixture
def usual_umask():
    before = os.umask(0o022)
    yield
    os.umask(before)


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("lock", [serving.shared, serving.exclusive])
def test_the_lock_taken_first_makes_private_folders_and_a_private_lock_file(tmp_path, usual_umask, lock):
    path = tmp_path / "new" / "deeper" / "study.sqlite"
    with lock(path):
        open_db(path, create=True).close()
    assert [_mode(folder) for folder in (tmp_path / "new", path.parent)] == [0o700, 0o700]
    assert _mode(serving.lock_path(path)) == 0o600
    assert _mode(path) == 0o600


def test_folders_that_were_there_keep_their_mode(tmp_path, usual_umask):
    (tmp_path / "open").mkdir(mode=0o755)
    path = tmp_path / "open" / "new" / "study.sqlite"
    with serving.shared(path):
        open_db(path, create=True).close()
    assert (_mode(tmp_path / "open"), _mode(path.parent)) == (0o755, 0o700)


def test_open_db_alone_makes_every_missing_folder_private(tmp_path, usual_umask):
    """``mkdir(parents=True, mode=0o700)`` gave the mode to the deepest folder alone."""
    path = tmp_path / "a" / "b" / "study.sqlite"
    open_db(path, create=True).close()
    assert [_mode(folder) for folder in (tmp_path / "a", path.parent)] == [0o700, 0o700]


def test_a_file_where_a_folder_must_be_made_is_refused_as_an_unwritable_folder(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    path = tmp_path / "taken" / "new" / "study.sqlite"
    with pytest.raises(serving.FolderUnwritable, match="cannot be written"), serving.exclusive(path):
        pass
