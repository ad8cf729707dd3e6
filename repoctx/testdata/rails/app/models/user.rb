class User; end
