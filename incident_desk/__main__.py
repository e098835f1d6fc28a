from incident_desk.cli import main

raise SystemExit(main())
