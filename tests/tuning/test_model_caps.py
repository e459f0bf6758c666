"""A pipeline's modelToUpload is stored as a registered model: its labels follow the label rules
and its containerSpec is capped, as every other user-fed document (they were stored as given)."""

import pytest

from tests.conftest import container_pool
from trainhub.tuning.spec import CUSTOM_TASK, MAX_MODEL_CONTAINER_SPEC, DocumentError, parse_pipeline


def pipeline(**model):
    return {"displayName": "p", "trainingTaskDefinition": CUSTOM_TASK,
            "trainingTaskInputs": {"workerPoolSpecs": [container_pool()]},
            "modelToUpload": {"displayName": "m", "artifactUri": "gs://b/m/", **model}}


@pytest.mark.parametrize("model, field", [
    ({"labels": {f"k{i}": "v" for i in range(65)}}, "modelToUpload.labels"),
    ({"labels": {"team": "x" * 64}}, "modelToUpload.labels.team"),
    ({"labels": {"Bad Key": "v"}}, "modelToUpload.labels.Bad Key"),
    ({"containerSpec": {"imageUri": "x" * MAX_MODEL_CONTAINER_SPEC}}, "modelToUpload.containerSpec"),
    ({"containerSpec": "serve:1"}, "modelToUpload.containerSpec"),
])
def test_an_uncapped_model_label_or_container_is_refused_naming_it(model, field):
    with pytest.raises(DocumentError) as refused:
        parse_pipeline(pipeline(**model))
    assert field in [violation.field for violation in refused.value.violations]


def test_valid_model_labels_and_container_are_kept():
    parsed = parse_pipeline(pipeline(labels={"team": "ml"}, containerSpec={"imageUri": "serve:1"}))
    model = parsed.document["modelToUpload"]
    assert model["labels"] == {"team": "ml"} and model["containerSpec"] == {"imageUri": "serve:1"}
