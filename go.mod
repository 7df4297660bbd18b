module github.com/sema-dev/sema

go 1.25
