"""`python -m services.router`: the router (see services/router/main.py)."""

from services.router.main import main

raise SystemExit(main())
