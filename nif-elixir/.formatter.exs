[inputs: ["{mix,.formatter}.exs", "{lib,test}/**/*.{ex,exs}", "nx-suite/**/*.{ex,exs}"], line_length: 110]
