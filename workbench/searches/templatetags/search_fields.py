"""`{% search_fields %}`: the search card of the new-run page, rendered by the runs app's template
without its views importing this app (it sits above them): the bound form with its errors when
the searches view shows the page again, else an empty one with the defaults."""

from django import template

from workbench.searches.forms import SearchForm

register = template.Library()


@register.inclusion_tag("searches/_search_card.html", takes_context=True)
def search_fields(context) -> dict:
    form = context.get("search_form") or SearchForm()
    # Open when shown again with its errors, or when the searches page's "Start a search" led here.
    request = context.get("request")
    asked = request is not None and request.GET.get("search") == "1"
    opened = bool(context.get("search_open")) or asked
    return {"search_form": form, "open": opened, "csrf_token": context.get("csrf_token")}
