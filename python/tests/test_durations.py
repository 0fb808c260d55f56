"""Tests for terrain_analysis.durations: reading a column of a durations CSV file."""

from __future__ import annotations

import numpy as np
import pytest

from terrain_analysis.durations import read_durations


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "durations.csv"
    path.write_text(
        "run,open_s,write_s,close_s,total_s,slowest_target\n"
        "1,0.001,0.52,0.003,0.524,t07\n"
        "2,0.002,0.61,0.002,0.614,t03\n"
        "3,0.001,0.55,0.004,0.555,t11\n"
        "\n"
    )
    return path


def test_reads_total_s_by_default_in_file_order(csv_file):
    np.testing.assert_array_equal(read_durations(csv_file), [0.524, 0.614, 0.555])


def test_reads_another_column(csv_file):
    np.testing.assert_array_equal(read_durations(csv_file, column="write_s"), [0.52, 0.61, 0.55])


def test_missing_column_is_named_with_the_columns_there_are(csv_file):
    with pytest.raises(
        ValueError,
        match=r"'column' must name a column of .*durations\.csv.*, got 'wall_s'; "
        r"its columns are run, open_s, write_s, close_s, total_s, slowest_target",
    ):
        read_durations(csv_file, column="wall_s")


def test_non_numeric_value_names_line_and_column(csv_file):
    with pytest.raises(ValueError, match=r"line 2 of .* holds 't07' in column 'slowest_target', not a number"):
        read_durations(csv_file, column="slowest_target")


def test_missing_value_is_reported(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("run,total_s\n1,0.5\n2\n")
    with pytest.raises(ValueError, match=r"line 3 of .* has no value in column 'total_s'"):
        read_durations(path)


def test_non_finite_value_is_reported(tmp_path):
    path = tmp_path / "nan.csv"
    path.write_text("run,total_s\n1,0.5\n2,nan\n")
    with pytest.raises(ValueError, match=r"line 3 of .* holds 'nan' in column 'total_s', not a finite number"):
        read_durations(path)


def test_empty_file_is_reported(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(ValueError, match=r"'path' must be a CSV file with a header line, got empty file"):
        read_durations(path)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_durations(tmp_path / "absent.csv")


def test_rows_whose_status_is_not_ok_are_left_out(tmp_path):
    path = tmp_path / "tasks.csv"
    path.write_text(
        "run,total_s,slowest_node,slowest_s,nodes,failed,status\n"
        "1,0.021,a@h,0.021,2,0,ok\n"
        "2,0.300,a@h,0.020,2,1,failed\n"
        "3,0.023,b@h,0.023,2,0,ok\n"
    )
    assert read_durations(path).tolist() == [0.021, 0.023]
