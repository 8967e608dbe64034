from datetime import timedelta

from django.utils import timezone

from workbench.runs.templatetags.runs_text import plain_number, starts_in


def test_it_says_within_a_minute_rather_than_zero_minutes():
    now = timezone.now()
    assert starts_in(now + timedelta(seconds=20)) == "within a minute"
    assert starts_in(now - timedelta(seconds=5)) == "within a minute"  # due: the scheduler starts it next
    assert starts_in(now + timedelta(minutes=12, seconds=30)) == "in 12\xa0minutes"


def test_it_writes_whole_epochs_without_a_decimal_point():
    assert (plain_number(3.0), plain_number(2.5), plain_number(12)) == ("3", "2.5", "12")
