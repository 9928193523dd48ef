from steer.cli import main

raise SystemExit(main())
