package gonja

import "github.com/nikolalohinski/gonja/v2/config"

type Config config.Config

var NewConfig = config.New
