from __future__ import annotations

from typing import Any

from django import forms

from trainhub.common.widgets import FastSelect
from trainhub.inventory.models import Node, NodePool, NodeState
from trainhub.inventory.selectors import OCCUPANCY


class NodeFilterForm(forms.Form):
    """The nodes page's GET filters and keyset position (the last node name of the previous page)."""

    pool = forms.ChoiceField(required=False, widget=FastSelect)
    state = forms.ChoiceField(required=False, widget=FastSelect, choices=[("", "Any state")] + list(NodeState.choices))
    occupancy = forms.ChoiceField(required=False, widget=FastSelect,
                                  choices=[("", "Any")] + [(key, key.capitalize()) for key in OCCUPANCY])
    q = forms.CharField(required=False, max_length=63, label="Name starts with",
                        widget=forms.TextInput(attrs={"type": "search"}))
    after = forms.CharField(required=False, max_length=63, widget=forms.HiddenInput)

    def __init__(self, data: Any, *, pools: list[NodePool]) -> None:
        super().__init__(data)
        self.pools = {pool.name: pool for pool in pools}
        self.fields["pool"].choices = [("", "All pools")] + [(name, name) for name in self.pools]

    def selected_pool(self) -> NodePool | None:
        return self.pools.get(self.cleaned_data["pool"])

    @property
    def is_filtered(self) -> bool:
        return any(self.data.get(name) for name in ("pool", "state", "occupancy", "q"))


class JoinTokenForm(forms.Form):
    """An admin's new join token: which pool the machines join, for how long, how many."""

    pool = forms.ModelChoiceField(queryset=NodePool.objects.order_by("name"), to_field_name="name",
                                  empty_label=None, widget=FastSelect)
    expires_in_hours = forms.IntegerField(min_value=1, max_value=24 * 30, initial=24, label="Expires in (hours)")
    max_uses = forms.IntegerField(min_value=1, max_value=100000, required=False, label="Machines (empty: any number)")
    description = forms.CharField(max_length=200, required=False)


class NodeActionForm(forms.Form):
    """An admin's action on one joined machine (buttons on the machines page)."""

    node = forms.ModelChoiceField(queryset=Node.objects.all(), to_field_name="name")
    action = forms.ChoiceField(choices=[("drain", "Drain"), ("undrain", "Return to service"),
                                        ("revoke", "Revoke credential"), ("remove", "Remove")])
