"""Editorial records typed or uploaded in the admin, for an editorial source: one record
through a form, or a file of them (a JSON list, or CSV with a header row). Both go in
through the editorial API's own path (`ingestion.api.enter_records`), so each record gets
a source record with its provenance, becomes lexically searchable at the commit, and has
its embedding queued.

A record the form refuses is shown back with the reasons beside its fields and nothing is
stored. A file's invalid rows are shown on the result page, each with its number, its
content and the reason, and quarantined as the API quarantines them; its valid rows are
ingested all the same.

Who may: whoever may add source records (the editors group, superusers), since that is
what entering records makes; the source itself is not changed. Ops may only look."""

from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse

from ingestion.api import MAX_BODY_BYTES, enter_records
from ingestion.drafts import BadItem, ParseResult, PayloadError
from ingestion.models import Source, SourceRecord
from ingestion.parsers import editorial

EXCERPT_SHOWN = 200  # characters of an invalid row on the result page


def may_enter_records(request: HttpRequest) -> bool:
    return request.user.has_perm("ingestion.add_sourcerecord")


class RecordForm(forms.Form):
    """The editorial API's record (ingestion/api_types.py), one field each; the editorial
    parser checks it, as it checks the API's."""

    id = forms.CharField(
        max_length=editorial.MAX_ID_CHARS,
        help_text="Its id in your system. Enter the same id again to update the record.",
    )
    title = forms.CharField(max_length=editorial.MAX_TITLE_CHARS)
    description = forms.CharField(
        required=False,
        max_length=editorial.MAX_DESCRIPTION_CHARS,
        widget=forms.Textarea(attrs={"rows": 4}),
    )
    venue = forms.CharField(required=False, max_length=editorial.MAX_VENUE_CHARS)
    aliases = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Other names of the venue, one a line.",
    )
    start = forms.CharField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="In the time zone below, unless it carries a UTC offset.",
    )
    end = forms.CharField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    timezone = forms.CharField(
        required=False,
        initial=settings.TIME_ZONE,
        help_text="An IANA time zone name, e.g. Europe/London.",
    )
    url = forms.CharField(required=False, max_length=editorial.MAX_URL_CHARS, label="URL")
    withdrawn = forms.BooleanField(required=False, help_text="Takes the listing down.")

    def record(self) -> dict[str, object]:
        """The record as the API would have been sent it: the fields typed in."""
        data = self.cleaned_data
        record: dict[str, object] = {
            name: data[name] for name in editorial.FIELDS if isinstance(data[name], str)
        }
        record["aliases"] = [line for line in data["aliases"].splitlines() if line.strip()]
        record["withdrawn"] = data["withdrawn"]
        return {name: value for name, value in record.items() if value not in ("", [])}

    def add_reasons(self, bad: BadItem) -> None:
        """The parser's reason, "field: problem; field: problem", beside each field."""
        for part in bad.reason.split("; "):
            name, _, problem = part.partition(": ")
            self.add_error(name if name in self.fields else None, problem or part)


class UploadForm(forms.Form):
    file = forms.FileField(help_text="Editorial records as CSV (with a header row) or a JSON list")

    def clean_file(self) -> UploadedFile:
        upload: UploadedFile = self.cleaned_data["file"]
        if (upload.size or 0) > MAX_BODY_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; an upload may be {MAX_BODY_BYTES:,} at "
                "most. Split it, and upload each part."
            )
        return upload


@dataclass(frozen=True)
class InvalidRow:
    number: int  # counted from 1, a CSV's header row not counted
    excerpt: str
    reason: str


def add_record_view(
    model_admin: admin.ModelAdmin[Source], request: HttpRequest, source_id: int
) -> HttpResponse:
    source = _editorial_source(request, source_id)
    form = RecordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        checked = editorial.validate_record(form.record(), 0)
        if isinstance(checked, BadItem):
            form.add_reasons(checked)
        else:
            [(_, external_id, outcome, _)] = enter_records(source, ParseResult([checked])).results
            model_admin.message_user(request, f"Record {external_id}: {outcome}.", messages.SUCCESS)
            record = SourceRecord.objects.get(source=source, external_id=external_id)
            if record.listing_id is None:
                return HttpResponseRedirect(_source_url(source))
            return HttpResponseRedirect(
                reverse("admin:ingestion_listing_change", args=[record.listing_id])
            )
    return _page(
        model_admin,
        request,
        source,
        "source_record_add.html",
        f"Add a record to {source.name}",
        form=form,
    )


def upload_view(
    model_admin: admin.ModelAdmin[Source], request: HttpRequest, source_id: int
) -> HttpResponse:
    source = _editorial_source(request, source_id)
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            result = editorial.parse_editorial(upload.read(), filename_hint=upload.name or "")
        except PayloadError as exc:
            form.add_error("file", f"Nothing was ingested: {exc.reason}")
        else:
            entered = enter_records(source, result)
            invalid = [
                InvalidRow((bad.position or 0) + 1, bad.excerpt[:EXCERPT_SHOWN], bad.reason)
                for bad in sorted(result.bad, key=lambda bad: bad.position or 0)
            ]
            return _page(
                model_admin,
                request,
                source,
                "source_upload_result.html",
                f"Uploaded to {source.name}",
                poll=entered.poll,
                invalid=invalid,
            )
    return _page(
        model_admin,
        request,
        source,
        "source_upload.html",
        f"Upload records to {source.name}",
        form=form,
    )


def _editorial_source(request: HttpRequest, source_id: int) -> Source:
    if not may_enter_records(request):
        raise PermissionDenied
    return get_object_or_404(Source, pk=source_id, kind=Source.Kind.EDITORIAL)


def _source_url(source: Source) -> str:
    return reverse("admin:ingestion_source_change", args=[source.pk])


def _page(
    model_admin: admin.ModelAdmin[Source],
    request: HttpRequest,
    source: Source,
    template: str,
    title: str,
    **context: object,
) -> TemplateResponse:
    return TemplateResponse(
        request,
        f"admin/ingestion/{template}",
        {
            **model_admin.admin_site.each_context(request),
            "opts": model_admin.opts,
            "title": title,
            "source": source,
            "source_url": _source_url(source),
            **context,
        },
    )
