"""Fair-share: Slurm's documented classic example, Fair Tree ranking and ties as fair_tree.c does them,
usage decay and reset periods, and sshare's values."""

import datetime as dt
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trainhub.slurm.fairshare import (
    NO_VAL,
    Association,
    FairShareError,
    compute_fairshare,
    decay_factor,
    decayed,
    usage_increment,
    usage_reset_due,
)


def acct(name, parent="root", shares=1):
    return Association(key=name, account=name, parent=parent, shares=shares)


def user(name, account, usage=0.0, shares=1):
    return Association(key=f"{name}@{account}", account=account, user=name, parent=account, shares=shares,
                       usage=usage)


ROOT = Association(key="root", account="root", shares=None)

#: classic_fair_share.shtml "Example": A(40) D(60); A -> B(30), C(10); D -> E(25), F(35);
#: user1 in B, users 2 and 3 in C, user4 in E, user5 in F; usage 0.2, 0.25, 0, 0.25, 0 "of the machine",
#: so the root's usage is 1: the remaining 0.3 is charged to the root user (it affects no one else).
CLASSIC_EXAMPLE = [ROOT, user("root", "root", 0.3, shares=0), acct("A", shares=40), acct("D", shares=60), acct("B", "A", 30), acct("C", "A", 10),
                   acct("E", "D", 25), acct("F", "D", 35), user("u1", "B", 0.2), user("u2", "C", 0.25),
                   user("u3", "C"), user("u4", "E", 0.25), user("u5", "F")]


def rows_by_key(result):
    return {row.key: row for row in result.rows}


def test_the_documented_classic_example():
    result = compute_fairshare(CLASSIC_EXAMPLE, fair_tree=False)
    rows = rows_by_key(result)
    assert rows["A"].effective_usage == pytest.approx(0.45)
    assert rows["D"].effective_usage == pytest.approx(0.25)
    assert rows["B"].effective_usage == pytest.approx(0.3875)
    assert rows["C"].effective_usage == pytest.approx(0.3)
    assert rows["E"].effective_usage == pytest.approx(0.25)
    assert rows["F"].effective_usage == pytest.approx(0.1458, abs=1e-4)
    expected_ue = {"u1@B": 0.3875, "u2@C": 0.275, "u3@C": 0.15, "u4@E": 0.25, "u5@F": 0.1458}
    for key, value in expected_ue.items():
        assert rows[key].effective_usage == pytest.approx(value, abs=1e-4), key
    expected_shares = {"u1@B": 0.3, "u2@C": 0.05, "u3@C": 0.05, "u4@E": 0.25, "u5@F": 0.35}
    for key, value in expected_shares.items():
        assert rows[key].norm_shares == pytest.approx(value), key
    expected_f = {"u1@B": 0.408479, "u2@C": 0.022097, "u3@C": 0.125000, "u4@E": 0.500000, "u5@F": 0.749154}
    for key, value in expected_f.items():
        assert result.factor(key) == pytest.approx(value, abs=5e-6), key


def test_the_dampening_factor_flattens_the_classic_curve():
    result = compute_fairshare(CLASSIC_EXAMPLE, fair_tree=False, dampening_factor=2)
    assert result.factor("u2@C") == pytest.approx(2 ** (-(0.275 / 0.05) / 2))


def test_fair_tree_ranks_users_of_the_better_served_account_first():
    """Reference 2.3 test vector: root -> A{u1 usage 100, u2 0}, B{u3 50} -> 1.0, 0.6667, 0.3333."""
    result = compute_fairshare([ROOT, acct("A"), acct("B"), user("u1", "A", 100), user("u2", "A"),
                                user("u3", "B", 50)])
    assert result.factor("u3@B") == 1.0
    assert result.factor("u2@A") == pytest.approx(2 / 3)
    assert result.factor("u1@A") == pytest.approx(1 / 3)


def test_tied_sibling_accounts_are_walked_one_after_the_other_as_the_code_does():
    """fair_tree.c never merges tied accounts (_count_tied_accounts stops at an account): the first
    user of the second account inherits the tie, the rest rank below (reference 2.3 [obs])."""
    result = compute_fairshare([ROOT, acct("X"), acct("Y"), user("a", "X", 10), user("b", "X"),
                                user("c", "Y", 10), user("d", "Y")])
    assert [result.factor(k) for k in ("b@X", "a@X", "d@Y", "c@Y")] == [1.0, 0.75, 0.75, 0.25]


def test_a_fresh_cluster_gives_every_user_one():
    result = compute_fairshare([ROOT, acct("A"), acct("B"), user("u1", "A"), user("u2", "B"), user("u3", "B")])
    assert {result.factor(k) for k in ("u1@A", "u2@B", "u3@B")} == {1.0}
    assert all(row.level_fs == math.inf for row in result.rows if not row.is_root)


def test_sibling_users_with_equal_level_fs_share_a_rank():
    result = compute_fairshare([ROOT, acct("A"), user("u1", "A", 5), user("u2", "A", 5), user("u3", "A", 10)])
    assert result.factor("u1@A") == result.factor("u2@A") == 1.0
    assert result.factor("u3@A") == pytest.approx(1 / 3)


def test_level_fs_is_shares_over_usage_within_the_level():
    result = compute_fairshare([ROOT, acct("A", shares=3), acct("B", shares=1), user("u1", "A", 30),
                                user("u2", "B", 70)])
    rows = rows_by_key(result)
    assert rows["A"].norm_shares == 0.75 and rows["A"].effective_usage == pytest.approx(0.3)
    assert rows["A"].level_fs == pytest.approx(2.5)
    assert rows["B"].level_fs == pytest.approx(0.25 / 0.7)
    assert rows["u1@A"].norm_usage == pytest.approx(0.3)
    assert rows["root"].raw_usage == 100


def test_raw_usage_since_the_last_decay_is_printed_but_moves_no_factor():
    """A run that ended since the last decay run is in RawUsage (up the tree); NormUsage, EffectvUsage,
    LevelFS and FairShare stay the last decay run's."""
    at_decay = [ROOT, acct("A", shares=3), acct("B", shares=1), user("u1", "A", 30), user("u2", "B", 70)]
    now = at_decay[:3] + [Association(key="u1@A", account="A", user="u1", parent="A", usage=30, raw_usage=130),
                          at_decay[4]]
    before, after = rows_by_key(compute_fairshare(at_decay)), rows_by_key(compute_fairshare(now))
    assert (after["u1@A"].raw_usage, after["A"].raw_usage, after["root"].raw_usage) == (130, 130, 200)
    assert after["u2@B"].raw_usage == 70
    for key, row in before.items():
        assert (after[key].norm_usage, after[key].effective_usage, after[key].level_fs, after[key].fairshare) == (
            row.norm_usage, row.effective_usage, row.level_fs, row.fairshare)


def test_zero_shares_give_level_fs_zero_and_the_lowest_rank():
    result = compute_fairshare([ROOT, acct("A"), user("u1", "A", 50), user("u0", "A", 0, shares=0)])
    assert rows_by_key(result)["u0@A"].level_fs == 0
    assert result.factor("u0@A") == 0.5 and result.factor("u1@A") == 1.0


def test_a_fairshare_parent_user_ranks_first_in_its_account():
    result = compute_fairshare([ROOT, acct("A"), user("heavy", "A", 100, shares=None), user("light", "A", 1)])
    assert result.factor("heavy@A") == 1.0
    assert rows_by_key(result)["heavy@A"].raw_shares is None


def test_a_fairshare_parent_account_lifts_its_children_to_its_level():
    result = compute_fairshare([ROOT, acct("A", shares=1), acct("P", "A", None), acct("Q", "A", 2),
                                user("p1", "P", 10), user("q1", "Q", 10)])
    rows = rows_by_key(result)
    assert rows["P"].level_fs is None  # sshare prints it blank
    assert rows["p1@P"].norm_shares == pytest.approx(1 / 3)  # level = p1's 1 + Q's 2
    assert rows["p1@P"].effective_usage == pytest.approx(0.5)  # usage / A's usage


def test_classic_fairshare_parent_users_take_the_accounts_values():
    result = compute_fairshare([ROOT, acct("A"), acct("B"), user("u1", "A", 10, shares=None), user("u2", "B", 30)],
                               fair_tree=False)
    rows = rows_by_key(result)
    assert result.factor("u1@A") == result.factor("A")
    assert rows["u1@A"].norm_shares == rows["A"].norm_shares == 0.5


def test_sshare_rows_are_in_tree_order_users_first():
    result = compute_fairshare([ROOT, acct("zeta"), acct("alpha"), user("root", "root"), user("bob", "alpha"),
                                acct("sub", "alpha")])
    assert [(row.depth, row.user or row.account) for row in result.rows] == [
        (0, "root"), (1, "root"), (1, "alpha"), (2, "bob"), (2, "sub"), (1, "zeta")]
    root_row = result.rows[0]
    assert root_row.is_root and root_row.raw_shares is None and root_row.effective_usage == 1.0
    assert root_row.fairshare is None and root_row.level_fs is None


@pytest.mark.parametrize("associations", [
    [acct("A")],
    [ROOT, ROOT],
    [ROOT, acct("A", parent="nowhere")],
    [ROOT, acct("A", parent="B"), acct("B", parent="A")],
    [ROOT, acct("A"), user("u", "A"), Association(key="x", account="A", parent="u@A")],
])
def test_malformed_trees_are_refused(associations):
    with pytest.raises(FairShareError):
        compute_fairshare(associations)


def test_a_tie_passes_through_an_account_without_users_as_in_fair_tree_c():
    """a3 (no users) ties a1 at Level FS 0, so a1's first user keeps the rank u1 got under a4."""
    result = compute_fairshare([ROOT, acct("a4"), acct("a3", shares=0), acct("a1", shares=0),
                                user("u1", "a4", shares=0), user("u0", "a1", shares=0)])
    assert result.factor("u1@a4") == result.factor("u0@a1") == 1.0


def test_a_fairshare_parent_account_first_in_its_level_starts_tied_as_in_fair_tree_c():
    """prev_level_fs starts at NO_VAL, the Level FS of a FairShare=parent account, so that account's
    first user keeps the previous rank even though its ancestor ranks lower."""
    result = compute_fairshare([ROOT, acct("a2"), acct("a0", shares=0), acct("a1", "a0", None),
                                user("u2", "a2", 1.0, shares=0), user("u1", "a1", shares=0)])
    assert rows_by_key(result)["a2"].level_fs > rows_by_key(result)["a0"].level_fs
    assert result.factor("u2@a2") == result.factor("u1@a1") == 1.0


def test_usage_halves_after_one_half_life():
    week = 7 * 86400
    assert decayed(1000.0, week, week) == pytest.approx(500.0, rel=1e-3)
    assert decayed(1000.0, week, 0) == 1000.0
    assert decay_factor(0) == 1.0
    assert decay_factor(week) == 1 - 0.693 / week


def test_a_running_job_adds_decayed_billable_seconds():
    week = 7 * 86400
    assert usage_increment(8, 300, week) == pytest.approx(300 * decay_factor(week) ** 300 * 8)
    assert usage_increment(8, 300, 0, usage_factor=2.0) == 4800
    assert usage_increment(8, 0, week) == 0


def test_usage_resets_at_period_boundaries():
    tz = dt.UTC
    saturday = dt.datetime(2025, 3, 8, 23, 0, tzinfo=tz)
    sunday = dt.datetime(2025, 3, 9, 0, 1, tzinfo=tz)
    assert usage_reset_due("WEEKLY", saturday, sunday)
    assert not usage_reset_due("WEEKLY", sunday, sunday + dt.timedelta(days=6))
    assert usage_reset_due("DAILY", saturday, sunday)
    assert usage_reset_due("MONTHLY", dt.datetime(2025, 2, 28, tzinfo=tz), dt.datetime(2025, 3, 1, 1, tzinfo=tz))
    assert usage_reset_due("QUARTERLY", dt.datetime(2025, 3, 31, tzinfo=tz), dt.datetime(2025, 4, 1, 1, tzinfo=tz))
    assert not usage_reset_due("QUARTERLY", dt.datetime(2025, 4, 2, tzinfo=tz), dt.datetime(2025, 5, 1, tzinfo=tz))
    assert usage_reset_due("YEARLY", dt.datetime(2024, 12, 31, tzinfo=tz), dt.datetime(2025, 1, 1, 1, tzinfo=tz))
    assert not usage_reset_due("NONE", None, sunday)
    assert usage_reset_due("NOW", None, sunday) and not usage_reset_due("NOW", saturday, sunday)


@st.composite
def trees(draw):
    accounts = ["root"]
    associations = [ROOT]
    for index in range(draw(st.integers(1, 6))):
        name = f"a{index}"
        associations.append(acct(name, draw(st.sampled_from(accounts)), draw(st.sampled_from([0, 1, 5, None]))))
        accounts.append(name)
    for index in range(draw(st.integers(1, 8))):
        associations.append(user(f"u{index}", draw(st.sampled_from(accounts)),
                                 draw(st.sampled_from([0.0, 1.0, 10.0, 1e6])), draw(st.sampled_from([0, 1, 3, None]))))
    return associations


@settings(deadline=None)
@given(trees(), st.booleans())
def test_factors_are_between_zero_and_one(associations, fair_tree):
    result = compute_fairshare(associations, fair_tree=fair_tree)
    users = [a.key for a in associations if a.user]
    for key in users:
        assert 0.0 <= result.factor(key) <= 1.0
    if fair_tree:
        assert max(result.factor(key) for key in users) == 1.0
        assert min(result.factor(key) for key in users) >= 1 / len(users)
        level_fs = [row.level_fs for row in result.rows if row.level_fs is not None]
        assert all(value >= 0 and value != NO_VAL for value in level_fs)


@settings(deadline=None)
@given(trees())
def test_in_fair_tree_a_higher_level_fs_sibling_account_outranks_all_users_of_a_lower_one(associations):
    """fair_tree.shtml: if sibling A has a higher Level FS than B, every user under A outranks every user under B.

    Only where no two sibling accounts tie and no account is FairShare=parent: fair_tree.c carries a
    tie from one account to the next (even through an account without users), so the first user of
    a tied account keeps the rank last given, possibly in another subtree -- real Slurm does that too
    (see the two tests below)."""
    result = compute_fairshare(associations)
    rows = rows_by_key(result)
    by_parent = {}
    for a in associations:
        if a.parent and a.user is None and a.shares is not None:
            by_parent.setdefault(a.parent, []).append(a.key)
    for siblings in by_parent.values():
        assume(len({rows[key].level_fs for key in siblings}) == len(siblings))
    assume(not any(a.user is None and a.shares is None and a.parent for a in associations))

    def users_under(key):
        found = [a.key for a in associations if a.user and a.parent == key]
        for a in associations:
            if a.user is None and a.parent == key:
                found += users_under(a.key)
        return found

    for siblings in by_parent.values():
        for high in siblings:
            for low in siblings:
                if rows[high].level_fs > rows[low].level_fs:
                    high_users, low_users = users_under(high), users_under(low)
                    if high_users and low_users:
                        assert min(result.factor(k) for k in high_users) > max(result.factor(k) for k in low_users)
