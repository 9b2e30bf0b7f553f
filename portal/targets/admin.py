from django.contrib import admin

from portal.targets.models import SshAccess, Target


@admin.register(Target)
class TargetAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "plain_url", "tls_url", "created")
    search_fields = ("name", "plain_url", "tls_url")
    readonly_fields = ("code", "created")


@admin.register(SshAccess)
class SshAccessAdmin(admin.ModelAdmin):
    list_display = ("target", "username", "host", "port", "server_process", "host_key_fingerprint")
    # The private key is encrypted at rest and never rendered, not even to operators.
    exclude = ("private_key_enc",)
    readonly_fields = ("public_key", "known_hosts", "host_key_fingerprint", "pinned_at", "updated")
