"""Content negotiation of the API: every answer is JSON, as Google's APIs answer whatever ``Accept`` says.

DRF's default negotiation parses the ``Accept`` header of every request to choose among the
renderers, and answers 406 when none matches. The API has one renderer, so there is nothing to
choose: this skips the parsing (about 0.1 ms per request on a small machine, measured on REST
creates) and answers JSON to a client that asked for something else, as Vertex AI does. Request
bodies are still matched against the parsers (a body that is not JSON is refused).
"""

from rest_framework.negotiation import DefaultContentNegotiation


class JsonAnswers(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        if len(renderers) == 1 and format_suffix is None:
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)
