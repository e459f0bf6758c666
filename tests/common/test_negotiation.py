"""The API answers JSON whatever Accept asks for, as Google's APIs do; bodies must still be JSON."""

JOBS = "/v1/projects/alpha/locations/us-central1/customJobs"


def test_an_answer_is_json_whatever_accept_says(api):
    client = api("uma")
    for accept in ("text/html", "application/xml;q=0.9", "*/*", "application/json"):
        response = client.get(JOBS, HTTP_ACCEPT=accept)
        assert response.status_code == 200, accept
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"customJobs": []}


def test_an_error_is_json_whatever_accept_says(api):
    response = api("mallory").get(JOBS, HTTP_ACCEPT="text/html")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_a_body_that_is_not_json_is_refused(api):
    response = api("uma").generic("POST", JOBS, "displayName=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert "Content-Type: application/json" in response.json()["error"]["message"]
