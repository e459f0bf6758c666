"""Form widgets that render in Python what Django renders through a template per option."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe


class FastSelect(forms.Select):
    """A <select> written in Python: the same HTML as Django's, without one template render per
    option (about 0.1 ms each, which made a form of a few long selects cost 50 ms)."""

    def render(self, name: str, value: Any, attrs: dict | None = None, renderer: Any = None) -> SafeString:
        widget = self.get_context(name, value, attrs)["widget"]
        groups = []
        for group_name, options, _index in widget["optgroups"]:
            rendered = format_html_join("", "<option value=\"{}\"{}>{}</option>", (
                (option["value"], mark_safe(" selected") if option["selected"] else "", option["label"])
                for option in options))
            groups.append(format_html('<optgroup label="{}">{}</optgroup>', group_name, rendered)
                          if group_name else rendered)
        return format_html("<select name=\"{}\"{}>{}</select>", widget["name"], flatatt(widget["attrs"]),
                           mark_safe("".join(groups)))
