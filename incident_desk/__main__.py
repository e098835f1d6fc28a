from incident_desk.cli.main import main

raise SystemExit(main())
