from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware


class LoginRequiredMiddleware(DjangoLoginRequiredMiddleware):
    """Every page requires login; the REST API answers 401/403 itself instead of redirecting.

    API views authenticate in Django REST framework (session or token), after middleware has
    run, so they are left to DRF's default IsAuthenticated permission.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
