# h5_edit.sh - sourced by test scripts that plant errors in HDF5 files.
# edit SRC DST PYTHON-STATEMENTS: a copy of SRC at DST, the statements run
# on it by $py with h5py (f: the file, open for writing).
# shellcheck disable=SC2154  # py: set by the script that sources this
edit() {
  cp "$1" "$2" && "$py" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'a')
$3
f.close()" "$2"
}
