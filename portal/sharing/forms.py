"""The owner's form for a new share link: days until it expires and a note for the auditor."""

from __future__ import annotations

from django import forms
from django.core.validators import MaxValueValidator

from portal.sharing import services
from portal.sharing.models import NOTE_MAX


class ShareForm(forms.Form):
    days = forms.IntegerField(
        required=False,
        min_value=1,
        help_text="Days until the link stops working (empty: the default).",
    )
    note = forms.CharField(
        required=False,
        max_length=NOTE_MAX,
        help_text="Who or what it is for, e.g. “Q3 audit, PCI 4.1” (the auditor sees it).",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The operator's maximum is read per form: settings may change between tests and deployments.
        self.fields["days"].validators.append(MaxValueValidator(services.max_days()))
        self.fields["days"].widget.attrs.update({"min": 1, "max": services.max_days()})
        self.fields["days"].initial = services.default_days()

    def clean_note(self) -> str:
        try:
            return services.check_note(self.cleaned_data["note"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc).capitalize() + ".") from None
