from benchlib.cli import main

raise SystemExit(main())
