"""The Tokens page: a user's own API tokens (any project they are a member of): create (the token is
shown once, on the answer to the POST, never stored in the session) and revoke."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from portal.api import tokens
from portal.api.models import ApiToken
from portal.projects.access import can, projects_for, role_in
from portal.projects.models import Role


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What uses it, e.g. “ci” or “grafana”.")
    project = forms.ModelChoiceField(queryset=None, to_field_name="code", empty_label=None)
    scope = forms.ChoiceField(choices=ApiToken.Scope.choices, initial=ApiToken.Scope.READ)

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["project"].queryset = projects_for(user).order_by("name")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Name the token.")
        return name

    def clean(self) -> dict:
        data = super().clean()
        project, scope = data.get("project"), data.get("scope")
        needs_member = scope == ApiToken.Scope.RUN
        if project is not None and needs_member and not can(role_in(self.user, project), Role.MEMBER):
            self.add_error("scope", "A run token needs the member role in the project: choose read.")
        return data


@login_required
@never_cache  # the answer to a create holds the token: no cache may keep it
@require_http_methods(["GET", "POST"])
def tokens_list(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None, user=request.user)
    created = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        token, plaintext = tokens.issue(
            request.user, data["project"], scope=data["scope"], name=data["name"], request=request
        )
        created = {"token": token, "plaintext": plaintext}
        form = TokenForm(user=request.user)
    mine = ApiToken.objects.filter(user=request.user).select_related("project").order_by("-created")
    return render(request, "api/tokens.html", {"tokens": mine, "form": form, "created": created})


@login_required
@require_POST
def tokens_revoke(request: HttpRequest, code) -> HttpResponse:
    """Only the token's own user revokes it here (operators: ``tollgate token revoke``)."""
    token = ApiToken.objects.filter(user=request.user, code=code).first()
    if token is None:
        raise Http404("No such token")
    if tokens.revoke(token, request=request):
        messages.info(request, f"Token {token.name} ({token.prefix}…) revoked: it no longer works.")
    else:
        messages.warning(request, f"Token {token.name} was revoked already.")
    return redirect("tokens-list")
