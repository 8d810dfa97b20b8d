from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from evaluation import ops_guardrail

        ops_guardrail.hand_in()  # the ops page's latest recall guardrail
