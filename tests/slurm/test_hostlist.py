"""Slurm host lists compress to ranges and expand back, keeping zero padding."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.slurm.hostlist import HostlistError, compress, expand


def test_consecutive_numbers_become_ranges():
    assert compress(["a4-0", "a4-1", "a4-2", "a4-3", "a4-7"]) == "a4-[0-3,7]"


def test_a_single_host_prints_without_brackets():
    assert compress(["login-0"]) == "login-0"
    assert compress(["a4-3", "login-0", "a4-1"]) == "a4-[1,3],login-0"


def test_zero_padding_is_kept_and_unpadded_widths_join():
    assert compress([f"node{i:02d}" for i in range(1, 11)]) == "node[01-10]"
    assert compress(["n9", "n10"]) == "n[9-10]"
    assert compress(["head", "head"]) == "head"


def test_expand_reverses_compress():
    assert expand("a4-[0-2,5],login-0") == ["a4-0", "a4-1", "a4-2", "a4-5", "login-0"]
    assert expand("node[08-10]") == ["node08", "node09", "node10"]
    assert expand("rack[1-2]-gpu") == ["rack1-gpu", "rack2-gpu"]


@pytest.mark.parametrize("text", ["", "a,,b", "a[1-", "a[3-1]", "a[x]", "a[1]b[2]", "n[0-99999999]"])
def test_malformed_lists_are_rejected(text):
    with pytest.raises(HostlistError):
        expand(text)


@settings(deadline=None)
@given(st.sets(st.tuples(st.sampled_from(["a4-", "h100-", "node"]), st.integers(0, 60)), min_size=1))
def test_compressed_lists_expand_to_the_same_hosts(pairs):
    names = {f"{prefix}{number}" for prefix, number in pairs}
    assert sorted(expand(compress(names))) == sorted(names)


def test_padded_and_unpadded_numbers_of_different_widths_stay_apart():
    assert compress(["n08", "n9"]) == "n[08,9]"
    assert expand("n[08,9]") == ["n08", "n9"]


@settings(deadline=None)
@given(st.sets(st.tuples(st.sampled_from(["a", "b-"]), st.integers(0, 120), st.sampled_from([0, 2, 3])), min_size=1))
def test_padded_names_survive_the_round_trip(triples):
    names = {f"{prefix}{number:0{width}d}" for prefix, number, width in triples}
    assert sorted(expand(compress(names))) == sorted(names)
