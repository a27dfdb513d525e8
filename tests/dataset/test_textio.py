"""The tolerant annotation parsers shared by all readers."""

import numpy as np
import pytest

from ltr.dataset.base import DatasetError
from ltr.dataset.textio import list_frames, read_flags_one_line, read_flags_per_line, read_rows

from .fixtures import write_frames, write_text


def test_read_rows_mixed_separators_crlf_nan(tmp_path):
    path = write_text(tmp_path / "gt.txt", " 1,2,3,4,\n5\t6\t7\t8\n9 10 11 12\nNaN,nan,NaN,NaN\n\n\n", "\r\n")
    rows = read_rows(path)
    np.testing.assert_array_equal(rows[:3], [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])
    assert rows.shape == (4, 4) and np.isnan(rows[3]).all()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,3,4\n\n5,6,7,8\n", r"gt.txt:2: expected 4 numbers, got ''"),
        ("1,2,3,4\n1,,3,4\n", r"gt.txt:2: expected 4 numbers, got '1,,3,4'"),
        ("1,2,3,4\n1,2,3,4,5\n", r"gt.txt:2: expected 4 numbers"),
        ("1,2,3,4\n" * 16 + "1,2,abc,4\n", r"gt.txt:17: expected a number, got 'abc'"),
    ],
)
def test_read_rows_errors_name_file_and_line(tmp_path, text, message):
    with pytest.raises(DatasetError, match=message):
        read_rows(write_text(tmp_path / "gt.txt", text))


def test_read_rows_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="annotation file not found: .*nope.txt"):
        read_rows(tmp_path / "nope.txt")


def test_flag_readers(tmp_path):
    np.testing.assert_array_equal(
        read_flags_one_line(write_text(tmp_path / "a.txt", "0,1,1,0")), [0, 1, 1, 0]
    )
    np.testing.assert_array_equal(
        read_flags_per_line(write_text(tmp_path / "b.label", "0\n3\n1\n")), [0, 3, 1]
    )
    with pytest.raises(DatasetError, match=r"b.label:2: expected one integer flag, got 'x'"):
        read_flags_per_line(write_text(tmp_path / "b.label", "0\nx\n"))


def test_list_frames_numeric_order_and_first(tmp_path):
    write_frames(tmp_path / "f", range(12), digits=0)
    assert [p.name for p in list_frames(tmp_path / "f", first=0)][:3] == ["0.jpg", "1.jpg", "2.jpg"]
    with pytest.raises(DatasetError, match=r"missing frame .*f/1.jpg"):
        list_frames(tmp_path / "f", first=1)
