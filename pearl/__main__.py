from pearl.cli import main

main()
