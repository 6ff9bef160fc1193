module github.com/hourglass-mq/hourglass

go 1.26.8
