"""Memory sizes, TRES strings, --gres requests and billing weights as Slurm reads and prints them."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.slurm.tres import (
    GresRequest,
    TresFormatError,
    billable_tres,
    format_memory_mb,
    format_tres,
    gres_tres,
    memory_tres,
    parse_billing_weights,
    parse_gres,
    parse_memory_mb,
    parse_tres,
)


@pytest.mark.parametrize(("text", "mb"), [("64G", 65536), ("64g", 65536), ("1000", 1000), ("512M", 512),
                                          ("1T", 1024 * 1024), ("1025K", 2), ("1K", 1)])
def test_memory_sizes_are_megabytes_with_units(text, mb):
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text", ["", "G", "1.5G", "-1", "12X", "1 G"])
def test_bad_memory_sizes_are_rejected(text):
    with pytest.raises(TresFormatError):
        parse_memory_mb(text)


def test_memory_prints_in_the_largest_exact_unit():
    assert format_memory_mb(65536) == "64G"
    assert format_memory_mb(1000) == "1000M"
    assert format_memory_mb(1536) == "1536M"
    assert format_memory_mb(1024 * 1024) == "1T"
    assert format_memory_mb(0) == "0M"


def test_a_tres_list_parses_with_case_insensitive_names():
    assert parse_tres("cpu=8,Mem=64G,GRES/gpu=4") == {"cpu": 8, "mem": 65536, "gres/gpu": 4}
    assert parse_tres("gres/gpu:a100=2,license/matlab=1") == {"gres/gpu:a100": 2, "license/matlab": 1}


def test_minus_one_clears_a_tres_limit_only_when_allowed():
    assert parse_tres("cpu=-1,gres/gpu=8", allow_unset=True) == {"cpu": None, "gres/gpu": 8}
    with pytest.raises(TresFormatError):
        parse_tres("cpu=-1")


@pytest.mark.parametrize("text", ["", "cpu", "cpu=x", "gpu=4", "cpu=1,cpu=2", "mem=1Q", "gres/=1"])
def test_bad_tres_lists_are_rejected(text):
    with pytest.raises(TresFormatError):
        parse_tres(text)


def test_tres_print_in_slurm_id_order_without_zeroes():
    tres = {"gres/gpu": 4, "billing": 8, "node": 1, "mem": 65536, "cpu": 8, "energy": 0}
    assert format_tres(tres) == "cpu=8,mem=64G,node=1,billing=8,gres/gpu=4"


def test_gres_requests_take_an_optional_type_and_count():
    assert parse_gres("gpu:4") == [GresRequest("gpu", None, 4)]
    assert parse_gres("gpu") == [GresRequest("gpu", None, 1)]
    assert parse_gres("gpu:a100:2,nic:1") == [GresRequest("gpu", "a100", 2), GresRequest("nic", None, 1)]
    assert parse_gres("gres:gpu:8") == [GresRequest("gpu", None, 8)]
    assert str(GresRequest("gpu", "a100", 2)) == "gpu:a100:2"
    assert gres_tres(parse_gres("gpu:a100:2")) == {"gres/gpu": 2, "gres/gpu:a100": 2}


@pytest.mark.parametrize("text", ["", "gpu:-1", "gpu:a:b:c", ":4", "gpu,gpu"])
def test_bad_gres_requests_are_rejected(text):
    with pytest.raises(TresFormatError):
        parse_gres(text)


def test_without_billing_weights_a_job_bills_its_cpus():
    assert billable_tres({"cpu": 8, "gres/gpu": 4}, {}) == 8


def test_billing_weights_sum_and_memory_weights_are_per_unit():
    weights = parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2.0")
    assert weights["mem"] == pytest.approx(0.25 / 1024)
    # slurm.conf.5's example job: 8 CPUs, 16 GB, 1 GPU -> 8 + 4 + 2
    assert billable_tres({"cpu": 8, "mem": 16 * 1024, "gres/gpu": 1}, weights) == pytest.approx(14.0)


def test_max_tres_bills_the_largest_node_tres_plus_global_ones():
    weights = parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2.0,license/matlab=3")
    tres = {"cpu": 8, "mem": 16 * 1024, "gres/gpu": 1, "license/matlab": 1}
    assert billable_tres(tres, weights, max_tres=True) == pytest.approx(8 + 3)


def test_a_unit_on_a_non_memory_weight_is_rejected():
    with pytest.raises(TresFormatError):
        parse_billing_weights("CPU=1G")


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["cpu", "mem", "node", "billing", "gres/gpu", "license/x"]),
                       st.integers(min_value=1, max_value=10**7)))
def test_printed_tres_parse_back(tres):
    assert parse_tres(format_tres(tres)) == tres if tres else format_tres(tres) == ""


def test_the_documented_billing_examples():
    """priority_multifactor.shtml: TRESBillingWeights=CPU=1.0,Mem=0.25G on 16-CPU 64 GB nodes."""
    weights = parse_billing_weights("CPU=1.0,Mem=0.25G")
    jobs = {"Job1": {"cpu": 1, "mem": 60 * 1024}, "Job2": {"cpu": 16, "mem": 1024}, "Job3": {"cpu": 16, "mem": 60 * 1024}}
    assert {name: billable_tres(tres, weights) for name, tres in jobs.items()} == {
        "Job1": 16, "Job2": 16.25, "Job3": 31}
    # The MAX_TRES table of the same page (its Job2 has 15 CPUs there and Job3 64 GB).
    max_jobs = {"Job1": {"cpu": 1, "mem": 60 * 1024}, "Job2": {"cpu": 15, "mem": 1024}, "Job3": {"cpu": 16, "mem": 64 * 1024}}
    assert {name: billable_tres(tres, weights, max_tres=True) for name, tres in max_jobs.items()} == {
        "Job1": 15, "Job2": 15, "Job3": 16}


@pytest.mark.parametrize(("option", "memory"), [
    # fixtures/22.05/job-records-mem: --mem counts per node, --mem-per-cpu per CPU, --mem-per-gpu per GPU
    ({"mem_per_node": 8000}, 8000 * 3),
    ({"mem_per_cpu": 6000}, 6000 * 4),
    ({"mem_per_gpu": 1000}, 1000 * 2),
    ({}, 0),
])
def test_a_jobs_memory_tres_counts_its_one_memory_option(option, memory):
    counts = {"gpus": 2, "cpus": 4, "nodes": 3}
    assert memory_tres(**{"mem_per_gpu": 0, "mem_per_cpu": 0, "mem_per_node": 0, **option}, **counts) == memory
