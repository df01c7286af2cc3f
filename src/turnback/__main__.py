from turnback.cli.main import main

raise SystemExit(main())
