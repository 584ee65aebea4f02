from graphfix.cli import main

main()
