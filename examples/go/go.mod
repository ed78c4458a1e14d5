module example.test/inboxd-example

go 1.26
