from django import forms

from trainhub.iam.models import Project
from trainhub.scheduling.quota import all_metrics


class QuotaForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.all(), to_field_name="project_id")
    location = forms.CharField(max_length=32, initial="us-central1")
    metric = forms.ChoiceField(choices=[(m, m) for m in all_metrics()])
    # The column is a 32-bit integer: a larger number answered 500 (PostgreSQL and SQLite alike past int64).
    limit = forms.IntegerField(min_value=0, max_value=2**31 - 1, required=False,
                               help_text="GPUs; leave empty to remove the limit (unlimited).")
