from graphfix.cli.main import main

main()
