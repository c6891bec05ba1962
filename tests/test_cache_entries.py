"""The build cache's entry files: what encode_entry writes decode_entry reads back exactly, and any change to the
bytes (a flipped byte, a cut, an appended byte) is refused, never read as another entry."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuop.pipeline.cache import BuildCache, decode_entry, encode_entry

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
values = st.dictionaries(st.text(max_size=10).filter(lambda k: k != "files"),
                         st.one_of(st.integers(), texts, st.lists(texts, max_size=3)), max_size=4)
files = st.dictionaries(st.text(min_size=1, max_size=30), texts, max_size=5)


@given(values, files)
def test_an_entry_with_files_reads_back_as_written(value, blobs):
    assert decode_entry(encode_entry(value, blobs), files=True) == {**value, "files": blobs}


@given(values)
def test_a_header_entry_reads_back_as_written(value):
    assert decode_entry(encode_entry(value)) == value


@settings(max_examples=200)
@given(values, files, st.data())
def test_any_changed_byte_is_refused(value, blobs, data):
    raw = bytearray(encode_entry(value, blobs))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(ValueError):
        decode_entry(bytes(raw), files=True)


@given(values, files, st.data())
def test_a_cut_or_extended_entry_is_refused(value, blobs, data):
    raw = encode_entry(value, blobs)
    cut = data.draw(st.integers(0, len(raw) - 1))
    for changed in (raw[:cut], raw + b"x"):
        with pytest.raises(ValueError):
            decode_entry(changed, files=True)


def test_a_recomputed_checksum_over_a_file_list_that_does_not_add_up_is_refused():
    raw = encode_entry({"key": "k"}, {"a.yaml": "abc"})
    body = raw[raw.index(b"\n") + 1:].replace(b'["a.yaml",3]', b'["a.yaml",2]')
    forged = b"gpuop-cache/2 " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    with pytest.raises(ValueError, match="does not add up"):
        decode_entry(forged, files=True)


def test_a_damaged_entry_on_disk_is_removed_and_counted(tmp_path):
    cache = BuildCache(tmp_path)
    cache.put("ab" * 32, {"build": {}}, {"x/a.yaml": "kind: Namespace\n"})
    assert cache.get_files("ab" * 32) == {"x/a.yaml": "kind: Namespace\n"}
    path = tmp_path / "builds" / "ab" / f"{'ab' * 32}.files"
    path.write_bytes(path.read_bytes().replace(b"Namespace", b"Nomespace"))
    assert cache.get_files("ab" * 32) is None and cache.rejected == 1 and not path.exists()
