"""Every existing user gets a personal project named after them, owning it; their targets,
scenarios and runs move into it (a run goes where its target is)."""

from django.db import migrations


def forwards(apps, schema_editor):
    User = apps.get_model("auth", "User")
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    Target = apps.get_model("targets", "Target")
    Scenario = apps.get_model("targets", "Scenario")
    Run = apps.get_model("runs", "Run")
    for user in User.objects.order_by("pk"):
        project = Project.objects.filter(personal_of=user).first()
        if project is None:
            name, n = user.username, 1
            while Project.objects.filter(name=name).exists():
                n += 1
                name = f"{user.username}-{n}"
            slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.lower())[:150] or "project"
            project = Project.objects.create(name=name, slug=slug, personal_of=user)
            Membership.objects.create(project=project, user=user, role="owner")
        Target.objects.filter(owner=user, project__isnull=True).update(project=project)
        Scenario.objects.filter(owner=user, project__isnull=True).update(project=project)
    for target in Target.objects.all().only("pk", "project_id"):
        Run.objects.filter(target=target, project__isnull=True).update(project_id=target.project_id)


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0001_initial"),
        ("targets", "0005_project"),
        ("runs", "0007_project"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
