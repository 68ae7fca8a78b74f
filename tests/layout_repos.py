"""Test-built repositories whose suites run from a folder, as their tox env runs them (issue 43):

- ``tox_changedir``: tox's ``changedir = tests``, where ``tests/pytest.ini`` names the test
  files ``check_*.py`` (run from the root, pytest would collect nothing);
- ``django_app``: a Django project under ``test_project/`` (``manage.py``, a settings package,
  an app with two models and their ``TestCase``s in ``tests.py``), tox's ``changedir =
  test_project`` and ``python manage.py test``; Django from ``requirements.txt``, pytest-django
  declared nowhere.
"""

from __future__ import annotations

from pathlib import Path

from reach_repos import CORE_TESTS, RECENT, DatedRepo, package, pyproject

TOX_CHANGEDIR = """\
[tox]
envlist = py311

[testenv]
changedir = tests
deps = pytest
commands = pytest
"""

CHECK_INI = """\
[pytest]
python_files = check_*.py
"""


def build_tox_changedir(path: Path, changedir: str = "tests") -> DatedRepo:
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("calc"),
        **package("calc", tests=False),
        "tox.ini": TOX_CHANGEDIR.replace("changedir = tests", f"changedir = {changedir}"),
        "tests/pytest.ini": CHECK_INI,
        "tests/check_core.py": CORE_TESTS.format(pkg="calc"),
    }
    repo.commit("calc, tested from tests/", files)
    return repo


DJANGO_TOX = """\
[tox]
envlist = py311

[testenv]
changedir = {toxinidir}/test_project
deps = -r{toxinidir}/requirements.txt
commands = python manage.py test
"""

MANAGE = """\
#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "%s")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
"""

SETTINGS = """\
SECRET_KEY = "tests-only"
INSTALLED_APPS = ["django.contrib.contenttypes", "library"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
"""

MODELS = """\
from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=100)
    born = models.IntegerField(null=True)

    def display_name(self):
        if not self.name:
            return "anonymous"
        if self.born is None:
            return self.name
        return f"{self.name} ({self.born})"

    def total_pages(self):
        total = 0
        for book in self.books.all():
            if book.pages > 0:
                total += book.pages
        return total


class Book(models.Model):
    title = models.CharField(max_length=200)
    pages = models.IntegerField(default=0)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")

    def length(self):
        if self.pages > 400:
            return "long"
        if self.pages < 100:
            return "short"
        return "medium"
"""

TESTS = """\
from django.test import TestCase

from library.models import Author, Book


class AuthorTests(TestCase):
    def test_display_name_with_year(self):
        self.assertEqual(Author(name="Ann", born=1950).display_name(), "Ann (1950)")

    def test_display_name_without_year(self):
        self.assertEqual(Author(name="Ann").display_name(), "Ann")

    def test_anonymous(self):
        self.assertEqual(Author(name="").display_name(), "anonymous")

    def test_total_pages(self):
        author = Author.objects.create(name="Ann")
        Book.objects.create(title="A", pages=120, author=author)
        Book.objects.create(title="B", pages=30, author=author)
        self.assertEqual(author.total_pages(), 150)


class BookTests(TestCase):
    def setUp(self):
        self.author = Author.objects.create(name="Bo")

    def test_long(self):
        self.assertEqual(Book(title="L", pages=500, author=self.author).length(), "long")

    def test_short(self):
        self.assertEqual(Book(title="S", pages=50, author=self.author).length(), "short")

    def test_medium(self):
        self.assertEqual(Book(title="M", pages=200, author=self.author).length(), "medium")
"""
DJANGO_TEST_COUNT = 7
DJANGO_TESTS = "test_project/library/tests.py"


def build_django_app(
    path: Path, settings: str = "test_project.settings", start: str = RECENT
) -> DatedRepo:
    repo = DatedRepo(path, start)
    files = {
        "requirements.txt": "Django>=4.2,<5.2\n",
        "tox.ini": DJANGO_TOX,
        "test_project/manage.py": MANAGE % settings,
        "test_project/test_project/__init__.py": "",
        "test_project/test_project/settings.py": SETTINGS,
        "test_project/library/__init__.py": "",
        "test_project/library/models.py": MODELS,
        DJANGO_TESTS: TESTS,
    }
    repo.commit("a Django app with two models, tested by manage.py test", files)
    return repo
