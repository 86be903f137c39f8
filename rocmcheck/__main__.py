from rocmcheck.cli import main

main()
